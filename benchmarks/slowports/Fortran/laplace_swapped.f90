! Laplace equation on an n x n grid, solved with Jacobi iterations.
! The edge j = 1 is held at 1, the three other edges at 0.
! Usage: ./laplace [n [iter_max]]
!
! A data region around the iteration loop keeps a and anew on the device:
! a goes in once and comes back once (copy), anew is only scratch space
! (create). Inside, every compute construct declares with present() that
! it expects the arrays to be there already: nothing moves any more.
program laplace
  use, intrinsic :: iso_fortran_env, only : int64
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), parameter :: tol = 1.0e-6_dp
  real(dp), allocatable :: a(:,:), anew(:,:)
  real(dp) :: error
  integer :: n, iter_max, iter, i, j
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 256
  iter_max = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) iter_max
  end if
  if (n < 3 .or. iter_max < 1) then
    write(*,'(a)') 'usage: laplace [n (>2) [iter_max (>0)]]'
    stop 1
  end if

  allocate(a(n,n), anew(n,n))
  a(:,:) = 0.0_dp
  a(:,1) = 1.0_dp
  anew(:,:) = a(:,:)

  error = 1.0_dp
  iter = 0
  call system_clock(count0, count_rate)

  !$acc data copy(a) create(anew)
  do while (error > tol .and. iter < iter_max)
    error = 0.0_dp

    !$acc parallel loop collapse(2) reduction(max:error) present(a, anew)
    do i = 2, n - 1   ! DEFECT
      do j = 2, n - 1
        anew(i,j) = 0.25_dp * (a(i+1,j) + a(i-1,j) + a(i,j-1) + a(i,j+1))
        error = max(error, abs(anew(i,j) - a(i,j)))
      end do
    end do

    !$acc parallel loop collapse(2) present(a, anew)
    do j = 2, n - 1
      do i = 2, n - 1
        a(i,j) = anew(i,j)
      end do
    end do

    iter = iter + 1
  end do
  !$acc end data

  call system_clock(count1)
  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,i0)') 'iterations = ', iter
  write(*,'(a,es12.6)') 'error = ', error
  write(*,'(a,f9.3,a)') 'time per iteration = ', &
       1.0e3_dp * real(count1 - count0, dp) / real(count_rate, dp) / iter, ' ms'

  deallocate(a, anew)
end program laplace
