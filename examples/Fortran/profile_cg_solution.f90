! Poisson's equation -(d2u/dx2 + d2u/dy2) = 1 on the unit square, u = 0 on
! the edges, solved by conjugate gradients on an n x n grid (5-point
! Laplacian, never stored as a matrix).
! Usage: ./cg [n [iterations]]   (n odd: the centre is a grid point)
!
! The four arrays are created on the device once, in a data region around
! the whole solver, and initialised there. Every loop is a parallel loop on
! data that is present: per iteration, only the results of the two dot
! products (8 bytes each) travel to the host, which needs them to compute
! alpha and beta. x comes back once, at the end.
program cg
  use, intrinsic :: iso_fortran_env, only : int64
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  ! Arrays hold the grid, indices 1..n, and a frame of zeros around it
  ! (the boundary, indices 0 and n+1), so that the stencil needs no special case.
  real(dp), allocatable :: x(:,:), r(:,:), p(:,:), q(:,:)
  real(dp) :: h, rr, rr_new, alpha
  integer :: n, iterations, it, i, j
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 199
  iterations = 300
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) iterations
  end if
  if (n < 3 .or. mod(n, 2) == 0 .or. iterations < 4) then
    write(*,'(a)') 'usage: cg [n (odd, >= 3) [iterations (>= 4)]]'
    stop 1
  end if
  h = 1.0_dp / (n + 1)
  allocate(x(0:n+1, 0:n+1), r(0:n+1, 0:n+1), p(0:n+1, 0:n+1), q(0:n+1, 0:n+1))

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,i0)') 'iterations = ', iterations
  call system_clock(count0, count_rate)
  !$acc data create(r, p, q) copyout(x)

  ! start from x = 0: the residual r = b - A x is h^2 inside, 0 on the frame
  !$acc parallel loop collapse(2) present(x, r, p, q)
  do j = 0, n + 1
    do i = 0, n + 1
      x(i, j) = 0.0_dp
      q(i, j) = 0.0_dp
      if (i >= 1 .and. i <= n .and. j >= 1 .and. j <= n) then
        r(i, j) = h * h
      else
        r(i, j) = 0.0_dp
      end if
      p(i, j) = r(i, j)
    end do
  end do

  rr = dot(n, r, r)
  do it = 1, iterations
    call apply_laplacian(n, p, q)
    alpha = rr / dot(n, p, q)
    call update_solution(n, alpha, p, q, x, r, rr_new)
    call update_direction(n, rr_new / rr, r, p)
    rr = rr_new
    if (mod(it, iterations / 4) == 0) then
      write(*,'(a,i0,a,es13.6)') 'iteration ', it, ': residual = ', sqrt(rr)
    end if
  end do

  !$acc end data
  call system_clock(count1)

  ! the centre of the square; the exact value is 0.0736713532...
  write(*,'(a,f12.10)') 'u(1/2,1/2) = ', x(n/2 + 1, n/2 + 1)
  write(*,'(a,f0.3,a)') 'time per iteration = ', &
       1.0e3_dp * real(count1 - count0, dp) / real(count_rate, dp) / iterations, ' ms'
  deallocate(x, r, p, q)

contains

  ! q = A p on the grid points, A being 4 on the diagonal, -1 for each neighbour.
  subroutine apply_laplacian(n, p, q)
    integer, intent(in) :: n
    real(dp), intent(in) :: p(0:n+1, 0:n+1)
    real(dp), intent(inout) :: q(0:n+1, 0:n+1)
    integer :: i, j
    !$acc parallel loop collapse(2) present(p, q)
    do j = 1, n
      do i = 1, n
        q(i, j) = 4.0_dp * p(i, j) - p(i-1, j) - p(i+1, j) - p(i, j-1) - p(i, j+1)
      end do
    end do
  end subroutine apply_laplacian

  ! The reductions name their launch geometry: GCC 12 combines the gangs' partial sums one gang
  ! at a time, and with the thousands of gangs it launches by default a dot product of 1.05 M
  ! values took 12.9 ms on an H100, against 0.5 ms with 1024 gangs (benchmarks/reduction).
  function dot(n, a, b) result(total)
    integer, intent(in) :: n
    real(dp), intent(in) :: a(0:n+1, 0:n+1), b(0:n+1, 0:n+1)
    real(dp) :: total
    integer :: i, j
    total = 0.0_dp
    !$acc parallel loop collapse(2) num_gangs(1024) vector_length(128) reduction(+:total) present(a, b)
    do j = 0, n + 1
      do i = 0, n + 1
        total = total + a(i, j) * b(i, j)
      end do
    end do
  end function dot

  ! x += alpha p, r -= alpha q; rr = the new r.r
  subroutine update_solution(n, alpha, p, q, x, r, rr)
    integer, intent(in) :: n
    real(dp), intent(in) :: alpha
    real(dp), intent(in) :: p(0:n+1, 0:n+1), q(0:n+1, 0:n+1)
    real(dp), intent(inout) :: x(0:n+1, 0:n+1), r(0:n+1, 0:n+1)
    real(dp), intent(out) :: rr
    real(dp) :: total
    integer :: i, j
    total = 0.0_dp
    !$acc parallel loop collapse(2) num_gangs(1024) vector_length(128) reduction(+:total) &
    !$acc   present(p, q, x, r)
    do j = 0, n + 1
      do i = 0, n + 1
        x(i, j) = x(i, j) + alpha * p(i, j)
        r(i, j) = r(i, j) - alpha * q(i, j)
        total = total + r(i, j) * r(i, j)
      end do
    end do
    rr = total
  end subroutine update_solution

  ! p = r + beta p
  subroutine update_direction(n, beta, r, p)
    integer, intent(in) :: n
    real(dp), intent(in) :: beta
    real(dp), intent(in) :: r(0:n+1, 0:n+1)
    real(dp), intent(inout) :: p(0:n+1, 0:n+1)
    integer :: i, j
    !$acc parallel loop collapse(2) present(r, p)
    do j = 0, n + 1
      do i = 0, n + 1
        p(i, j) = r(i, j) + beta * p(i, j)
      end do
    end do
  end subroutine update_direction

end program cg
