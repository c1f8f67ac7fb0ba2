! A noisy periodic signal, smoothed, then integrated with a running sum.
! Usage: ./scan [n [steps]]   (n: a multiple of 8; each step is two passes)
!
! Every part runs on the accelerator, each with the construct that fits it:
! - the signal and the smoothing passes: each point is computed on its own,
!   so `parallel loop`;
! - the running sum, phases 1 and 3: the blocks, then the points, are
!   independent, so `parallel loop`;
! - phase 2: each block offset needs the previous one. Only n/block values,
!   so one device thread does it (`serial`) and the data stays where it is.
! The data region in the main program keeps the arrays on the device all along.
program scan
  use, intrinsic :: iso_fortran_env, only : int64
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: block = 256
  real(dp), allocatable :: s(:), work(:), p(:), offset(:)
  real(dp) :: h
  integer :: n, steps, nblocks, k
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 262144
  steps = 100
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) steps
  end if
  if (n < 8 .or. mod(n, 8) /= 0 .or. steps < 0) then
    write(*,'(a)') 'usage: scan [n (a multiple of 8) [steps (>= 0)]]'
    stop 1
  end if
  nblocks = (n + block - 1) / block
  allocate(s(n), work(n), p(n), offset(nblocks))

  call system_clock(count0, count_rate)
  !$acc data create(work, offset) copyout(s, p)
  call make_signal(n, s)
  do k = 1, steps
    call smooth(n, s, work)
    call smooth(n, work, s)
  end do
  call running_sum(n, nblocks, s, p, offset)
  !$acc end data
  call system_clock(count1)

  ! Smoothing keeps the mean (1) and the wave cancels over each half
  ! period, so both integrals are exact whatever n and steps.
  h = 1.0_dp / n
  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,i0)') 'steps = ', steps
  write(*,'(a,f15.12)') 's(t=0) = ', s(1)
  write(*,'(a,f15.12)') 's(t=1/8) = ', s(n/8 + 1)
  write(*,'(a,f15.12)') 'integral = ', h * p(n)
  write(*,'(a,f15.12)') 'half integral = ', h * (p(n/2 + 1) - 0.5_dp * (s(1) + s(n/2 + 1)))
  write(*,'(a,f0.3,a)') 'time = ', real(count1 - count0, dp) / real(count_rate, dp), ' s'
  deallocate(s, work, p, offset)

contains

  ! A slow wave of 3 periods plus a fast wobble of period 4 samples.
  subroutine make_signal(n, s)
    integer, intent(in) :: n
    real(dp), intent(out) :: s(n)
    real(dp), parameter :: pi = 3.141592653589793_dp
    real(dp) :: t
    integer :: i
    !$acc parallel loop present(s) private(t)
    do i = 1, n
      t = real(i - 1, dp) / n
      s(i) = 1.0_dp + cos(6.0_dp * pi * t) + 0.5_dp * cos(0.5_dp * pi * mod(i - 1, 4))
    end do
  end subroutine make_signal

  ! One smoothing pass on a periodic grid (the ends are neighbours).
  subroutine smooth(n, in, out)
    integer, intent(in) :: n
    real(dp), intent(in) :: in(n)
    real(dp), intent(out) :: out(n)
    integer :: i, left, right
    !$acc parallel loop present(in, out) private(left, right)
    do i = 1, n
      left = i - 1
      if (i == 1) left = n
      right = i + 1
      if (i == n) right = 1
      out(i) = 0.25_dp * in(left) + 0.5_dp * in(i) + 0.25_dp * in(right)
    end do
  end subroutine smooth

  ! p(i) = s(1) + s(2) + ... + s(i); offset has one value per block.
  subroutine running_sum(n, nblocks, s, p, offset)
    integer, intent(in) :: n, nblocks
    real(dp), intent(in) :: s(n)
    real(dp), intent(out) :: p(n)
    real(dp), intent(inout) :: offset(nblocks)
    real(dp) :: partial, before, block_total
    integer :: b, i, first, last

    ! phase 1: the running sum inside each block, blocks side by side
    !$acc parallel loop present(s, p, offset) private(first, last, partial)
    do b = 1, nblocks
      first = (b - 1) * block + 1
      last = min(b * block, n)
      partial = 0.0_dp
      !$acc loop seq
      do i = first, last
        partial = partial + s(i)
        p(i) = partial
      end do
      offset(b) = partial
    end do

    ! phase 2: block totals -> what comes before each block; a chain of
    ! dependent steps, short enough for one device thread
    !$acc serial present(offset)
    before = 0.0_dp
    do b = 1, nblocks
      block_total = offset(b)
      offset(b) = before
      before = before + block_total
    end do
    !$acc end serial

    ! phase 3: every point gets the offset of its block
    !$acc parallel loop present(p, offset)
    do i = 1, n
      p(i) = p(i) + offset((i - 1) / block + 1)
    end do
  end subroutine running_sum

end program scan
