! Largest eigenvalue of the n x n matrix a(i,j) = min(i,j) (i, j from 1)
! by power iteration: x <- a x / |a x|, repeated. Its exact value is
! 1 / (4 sin^2(pi / (2 (2n + 1)))), and the second one is about 9 times
! smaller, so a few tens of iterations are plenty.
! Usage: ./power [n [iterations]]
!
! The matrix is built on the device and never leaves it. In the product
! y = a x each gang takes whole rows, and the vector lanes of the gang share
! the sum along a row (a vector-level reduction).
program power_iteration
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), parameter :: pi = 3.141592653589793_dp
  real(dp), allocatable :: a(:,:), x(:), y(:)
  real(dp) :: s, x0, xy, yy, lambda, scale, exact
  integer :: n, iterations, it, i, j
  character(len=32) :: arg

  n = 1000
  iterations = 20
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) iterations
  end if
  if (n < 1 .or. iterations < 1) then
    write(*,'(a)') 'usage: power [n [iterations]]'
    stop 1
  end if

  allocate(a(n,n), x(n), y(n))

  x0 = 1.0_dp / sqrt(real(n, dp))   ! |x| = 1

  ! a and y only exist on the device; x goes back to the host at the end
  !$acc data create(a, y) copyout(x)

  !$acc parallel loop gang present(a)
  do j = 1, n
    !$acc loop vector
    do i = 1, n
      a(i,j) = real(min(i, j), dp)
    end do
  end do

  !$acc parallel loop present(x)
  do j = 1, n
    x(j) = x0
  end do

  lambda = 0.0_dp
  do it = 1, iterations
    ! y = a x: rows to gangs, each row's sum to the vector lanes.
    ! The matrix is symmetric, so row i is also column i: reading a(j,i)
    ! walks through contiguous memory. s is declared outside the loop:
    ! private(s) gives every gang its own.
    !$acc parallel loop gang private(s) vector_length(128) present(a, x, y)
    do i = 1, n
      s = 0.0_dp
      !$acc loop vector reduction(+:s)
      do j = 1, n
        s = s + a(i,j) * x(j)   ! DEFECT: a is symmetric
      end do
      y(i) = s
    end do

    ! |x| = 1, so x.y is the Rayleigh quotient: the eigenvalue estimate
    xy = 0.0_dp
    yy = 0.0_dp
    !$acc parallel loop reduction(+:xy, yy) present(x, y)
    do i = 1, n
      xy = xy + x(i) * y(i)
      yy = yy + y(i) * y(i)
    end do
    lambda = xy

    scale = 1.0_dp / sqrt(yy)
    !$acc parallel loop present(x, y)
    do i = 1, n
      x(i) = y(i) * scale
    end do
  end do

  !$acc end data

  s = sin(pi / (2.0_dp * (2.0_dp * n + 1.0_dp)))
  exact = 1.0_dp / (4.0_dp * s * s)

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,i0)') 'iterations = ', iterations
  write(*,'(a,es16.10)') 'lambda = ', lambda
  write(*,'(a,es9.3)') 'relative error = ', abs(lambda - exact) / exact

  deallocate(a, x, y)
end program power_iteration
