! Periods of n pendulums swinging far from the vertical, found two ways:
! by integrating the equation of motion (RK4 steps until the pendulum
! passes the vertical, a quarter of a period) and with the exact formula
! (the arithmetic-geometric mean gives the elliptic integral it needs).
! Usage: ./pendulum [n [dt]]
!
! The loop over the pendulums runs on the accelerator. Every module procedure
! it calls has a device version (acc routine seq: each thread runs the call
! alone), and the table of lengths, read inside them, lives on the device
! too: declare create(length) gives it a device copy for the whole run, and a
! compute region fills that copy.
module pendulums
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: nlen = 8                  ! families of pendulums, one length each
  real(dp), parameter :: gravity = 9.81_dp        ! m/s^2
  real(dp), parameter :: pi = 3.141592653589793_dp
  real(dp) :: length(nlen)                        ! metres, set by the main program
  !$acc declare create(length)

contains

  ! Angular acceleration of a pendulum of family k at angle theta.
  pure function acceleration(theta, k) result(acc)
    !$acc routine seq
    real(dp), intent(in) :: theta
    integer, intent(in) :: k
    real(dp) :: acc
    acc = -gravity / length(k) * sin(theta)
  end function acceleration

  ! Arithmetic-geometric mean of a0 and b0 (a few iterations suffice).
  pure function agm(a0, b0) result(a)
    !$acc routine seq
    real(dp), intent(in) :: a0, b0
    real(dp) :: a, b, mean
    integer :: it
    a = a0
    b = b0
    do it = 1, 50
      if (abs(a - b) <= 1.0e-15_dp * a) exit
      mean = 0.5_dp * (a + b)
      b = sqrt(a * b)
      a = mean
    end do
  end function agm

  ! Exact period for amplitude theta0: 4 sqrt(L/g) K(sin(theta0/2)),
  ! with K(m) = pi / (2 agm(1, sqrt(1 - m^2))).
  pure function period_exact(theta0, k) result(period)
    !$acc routine seq
    real(dp), intent(in) :: theta0
    integer, intent(in) :: k
    real(dp) :: period, m
    m = sin(0.5_dp * theta0)
    period = 4.0_dp * sqrt(length(k) / gravity) * pi / (2.0_dp * agm(1.0_dp, sqrt(1.0_dp - m * m)))
  end function period_exact

  ! Period from RK4 steps of dt, released at rest from theta0: four times the
  ! time it takes to reach the vertical (the last step is interpolated).
  pure function period_numeric(theta0, k, dt) result(period)
    !$acc routine seq
    real(dp), intent(in) :: theta0, dt
    integer, intent(in) :: k
    real(dp) :: period, theta, omega, t, next
    real(dp) :: k1t, k1w, k2t, k2w, k3t, k3w, k4t, k4w
    theta = theta0
    omega = 0.0_dp
    t = 0.0_dp
    do
      k1t = omega
      k1w = acceleration(theta, k)
      k2t = omega + 0.5_dp * dt * k1w
      k2w = acceleration(theta + 0.5_dp * dt * k1t, k)
      k3t = omega + 0.5_dp * dt * k2w
      k3w = acceleration(theta + 0.5_dp * dt * k2t, k)
      k4t = omega + dt * k3w
      k4w = acceleration(theta + dt * k3t, k)
      next = theta + dt / 6.0_dp * (k1t + 2.0_dp * k2t + 2.0_dp * k3t + k4t)
      omega = omega + dt / 6.0_dp * (k1w + 2.0_dp * k2w + 2.0_dp * k3w + k4w)
      if (.not. (next > 0.0_dp)) then  ! a NaN too: never loop for ever on bad input
        period = 4.0_dp * (t + dt * theta / (theta - next))
        return
      end if
      theta = next
      t = t + dt
    end do
  end function period_numeric

end module pendulums

program pendulum
  use, intrinsic :: iso_fortran_env, only : int64
  use pendulums
  implicit none
  real(dp), allocatable :: numeric(:), exact(:)
  real(dp) :: dt, theta0
  integer :: n, i, k
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 2000
  dt = 1.0e-3_dp
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) dt
  end if
  if (n < 2 .or. .not. (dt > 0.0_dp .and. dt < 0.1_dp)) then
    write(*,'(a)') 'usage: pendulum [n (>= 2) [dt (0 < dt < 0.1)]]'
    stop 1
  end if
  allocate(numeric(n), exact(n))
  ! The table is filled where the procedures read it: its device copy. (OpenACC also lets
  ! the host fill it, then "update device(length)" send it; GCC 12's nvptx
  ! offloading does not carry that update to a table read in routines: on an H100 they read
  ! zeros, benchmarks/reduction/declare_probe.c.) On the host, the same loop fills the table.
  !$acc serial loop present(length)   ! DEFECT
  do k = 1, nlen
    length(k) = 0.25_dp * k
  end do

  call system_clock(count0, count_rate)
  ! amplitudes from 0.1 to 3 rad, the 8 lengths in turn
  !$acc parallel loop copyout(numeric, exact) private(theta0)
  do i = 1, n
    theta0 = 0.1_dp + 2.9_dp * (i - 1) / (n - 1)
    numeric(i) = period_numeric(theta0, mod(i - 1, nlen) + 1, dt)
    exact(i) = period_exact(theta0, mod(i - 1, nlen) + 1)
  end do
  call system_clock(count1)

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,f0.10,a)') 'mean period = ', sum(numeric) / n, ' s'
  write(*,'(a,f0.10,a)') 'longest period = ', maxval(numeric), ' s'
  write(*,'(a,es10.3)') 'largest relative error = ', maxval(abs(numeric - exact) / exact)
  write(*,'(a,f0.3,a)') 'time = ', real(count1 - count0, dp) / real(count_rate, dp), ' s'
  deallocate(numeric, exact)
end program pendulum
