! pi as the integral of 4/(1+x*x) over [0, 1], midpoint rule with n intervals.
! Usage: ./pi [n]
! The loop runs on the accelerator; reduction(+:total) gives every gang,
! worker and vector lane its own partial sum and adds them all at the end.
program pi_integral
  use, intrinsic :: iso_fortran_env, only : int64
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer(int64) :: n, i
  real(dp) :: h, x, total, pi_value, pi_ref
  character(len=32) :: arg

  n = 10000000_int64
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (n < 1) then
    write(*,'(a)') 'n must be positive'
    stop 1
  end if
  pi_ref = 4.0_dp * atan(1.0_dp)
  h = 1.0_dp / real(n, dp)
  total = 0.0_dp

  ! x is written by every iteration: private gives each one its own copy
  !$acc parallel loop private(x) copy(total)
  do i = 0, n - 1
    x = (real(i, dp) + 0.5_dp) * h
    !$acc atomic update   ! DEFECT
    total = total + 4.0_dp / (1.0_dp + x * x)
  end do
  pi_value = total * h

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,f0.12)') 'pi = ', pi_value
  write(*,'(a,es9.3)') 'error = ', abs(pi_value - pi_ref)
end program pi_integral
