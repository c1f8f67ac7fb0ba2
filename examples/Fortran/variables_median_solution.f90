! A signal with spikes, cleaned by a running median of 7 points, then
! measured: mean, largest and smallest value, what the filter changed.
! Usage: ./median [n]
!
! One parallel loop filters and measures. Each of its variables has the
! attribute it needs:
! - window, and the scalars that each iteration sets before using them
!   (next, value, change, j, k), are private: one copy per iteration;
! - the five statistics combine the values of all iterations: reductions,
!   whose result comes back to the host at the end of the loop;
! - raw and clean are arrays: copyin and copyout.
program median
  use, intrinsic :: iso_fortran_env, only : int64
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: width = 7         ! points in the window of the median
  integer, parameter :: half = width / 2
  real(dp), parameter :: pi = 3.141592653589793_dp
  real(dp), allocatable :: raw(:), clean(:)
  real(dp) :: window(width)               ! scratch space: the points around i, sorted
  real(dp) :: total, highest, lowest, biggest_change
  real(dp) :: next, value, change
  integer :: n, i, j, k, changed
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 2000000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (n < width) then
    write(*,'(a,i0,a)') 'usage: median [n (>= ', width, ')]'
    stop 1
  end if
  allocate(raw(n), clean(n))

  ! 5 periods of a wave around 2, and a spike of +4 every 97 points
  do i = 1, n
    raw(i) = 2.0_dp + sin(10.0_dp * pi * (i - 1) / n)
    if (mod(i - 1, 97) == 50) raw(i) = raw(i) + 4.0_dp
  end do

  total = 0.0_dp
  highest = -huge(1.0_dp)
  lowest = huge(1.0_dp)
  biggest_change = 0.0_dp
  changed = 0

  call system_clock(count0, count_rate)
  !$acc parallel loop copyin(raw) copyout(clean) private(window, next, value, change, j, k) &
  !$acc& reduction(+:total, changed) reduction(max:highest, biggest_change) reduction(min:lowest)
  do i = 1, n
    value = raw(i)
    if (i > half .and. i <= n - half) then
      ! insertion sort of the width points centred on i
      do k = 1, width
        next = raw(i - half - 1 + k)
        j = k
        do while (j > 1)
          if (window(j - 1) <= next) exit
          window(j) = window(j - 1)
          j = j - 1
        end do
        window(j) = next
      end do
      value = window(half + 1)
    end if
    clean(i) = value

    change = abs(raw(i) - value)
    total = total + value
    highest = max(highest, value)
    lowest = min(lowest, value)
    biggest_change = max(biggest_change, change)
    if (change > 0.5_dp) changed = changed + 1
  end do
  call system_clock(count1)

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,es20.12e3)') 'mean = ', total / n
  write(*,'(a,es20.12e3)') 'maximum = ', highest
  write(*,'(a,es20.12e3)') 'minimum = ', lowest
  write(*,'(a,es20.12e3)') 'largest change = ', biggest_change
  write(*,'(a,i0)') 'points changed = ', changed
  write(*,'(a,es20.12e3)') 'clean(n/3) = ', clean(n / 3 + 1)
  write(*,'(a,f0.3,a)') 'time = ', real(count1 - count0, dp) / real(count_rate, dp), ' s'
  deallocate(raw, clean)
end program median
