program saxpy
  implicit none
  integer :: i, n
  real, allocatable :: x(:), y(:)
  real :: a, total
  n = 1000000
  a = 2.0
  allocate(x(n), y(n))
  !$acc data create(x, y)
  !$acc parallel loop
  do i = 1, n
    x(i) = 1.0
    y(i) = 0.0
  end do
  !$acc kernels
  do i = 1, n
    y(i) = a * x(i) + y(i)
  end do
  !$acc end kernels
  total = 0.0
  !$acc parallel loop reduction(+:total) collapse(1)
  do i = 1, n
    total = total + y(i)
  end do
  !$acc update host(y(1:10))
  !$acc end data
  print *, "y_last = ", y(n), " total = ", total
end program saxpy
