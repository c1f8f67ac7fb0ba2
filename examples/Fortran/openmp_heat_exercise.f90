! Heat spreading on an n x n plate wrapped into a torus (periodic edges),
! explicit steps u <- u + r (sum of the 4 neighbours - 4 u), r = 0.2.
! A hot square (1) sits in the middle of a cold plate (0). Nothing leaves
! a torus: the total heat stays the same.
! Usage: ./heat [n [steps]]    (steps is rounded up to an even number)
!
! The program is serial. To do, with OpenMP (not OpenACC):
!  - run each step on the device, its loop nest shared out among teams and
!    their threads;
!  - keep u and v on the device for all the steps: u goes in and comes back
!    once, v is only scratch space;
!  - compute the total heat and the hottest value on the device too.
module heat_steps
  implicit none
  integer, parameter :: dp = kind(1.0d0)

contains

  ! One step from `from` to `to`; row and column indices wrap around.
  subroutine step(n, r, from, to)
    integer, intent(in) :: n
    real(dp), intent(in) :: r
    real(dp), intent(in) :: from(n, n)
    real(dp), intent(out) :: to(n, n)
    integer :: i, j

    ! TODO: on the device
    do j = 1, n
      do i = 1, n
        to(i, j) = from(i, j) + r * (from(modulo(i - 2, n) + 1, j) + from(modulo(i, n) + 1, j) &
                                     + from(i, modulo(j - 2, n) + 1) + from(i, modulo(j, n) + 1) &
                                     - 4.0_dp * from(i, j))
      end do
    end do
  end subroutine step

end module heat_steps

program heat
  use, intrinsic :: iso_fortran_env, only : int64
  use heat_steps
  implicit none
  real(dp), parameter :: r = 0.2_dp   ! stable for r <= 0.25
  real(dp), allocatable :: u(:,:), v(:,:)
  real(dp) :: heat0, total, hottest
  integer :: n, steps, s, i, j
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 256
  steps = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) steps
  end if
  if (n < 4 .or. steps < 0) then
    write(*,'(a)') 'usage: heat [n (>3) [steps (>=0)]]'
    stop 1
  end if
  allocate(u(n, n), v(n, n))
  u(:,:) = 0.0_dp
  u(3*n/8 + 1 : 5*n/8, 3*n/8 + 1 : 5*n/8) = 1.0_dp
  heat0 = sum(u)

  call system_clock(count0, count_rate)
  total = 0.0_dp
  hottest = 0.0_dp
  ! TODO: u and v on the device for all that follows
  do s = 1, steps, 2
    call step(n, r, u, v)
    call step(n, r, v, u)
  end do
  ! TODO: on the device
  do j = 1, n
    do i = 1, n
      total = total + u(i, j)
      hottest = max(hottest, u(i, j))
    end do
  end do
  call system_clock(count1)

  write(*,'(a,i0,a,i0)') 'n = ', n, ', steps = ', steps + mod(steps, 2)
  write(*,'(a,es10.3)') 'heat drift = ', abs(total - heat0) / heat0
  write(*,'(a,f14.12)') 'hottest = ', hottest
  write(*,'(a,f14.12)') 'center = ', u(n/2 + 1, n/2 + 1)
  write(*,'(a,f8.3,a)') 'time = ', real(count1 - count0, dp) / count_rate, ' s'
  deallocate(u, v)
end program heat
