! y = a*x + y on vectors of n reals of kind 8 ("saxpy" in double precision).
! Usage: ./saxpy [n]
! Both loops run on the accelerator. The dummy arrays have an explicit
! shape, so the compiler knows their size; the data clauses state which
! way the data has to travel.
program saxpy_demo
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer :: n, i
  real(dp), allocatable :: x(:), y(:)
  real(dp) :: total
  character(len=32) :: arg

  n = 1000000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (n < 2) then
    write(*,'(a)') 'n must be at least 2'
    stop 1
  end if
  allocate(x(n), y(n))

  call init(n, x, y)
  call saxpy(n, 2.0_dp, x, y)

  ! every y(i) is now 1 + x(i): the mean is 1.5 and the last element 2
  total = 0.0_dp
  do i = 1, n
    total = total + y(i)
  end do

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,f0.6)') 'y_last = ', y(n)
  write(*,'(a,f0.9)') 'mean = ', total / n

  deallocate(x, y)

contains

  ! Fill x with n points spread evenly over [0, 1] and y with 1 - x.
  ! Both arrays are only written: copyout brings them back at the end.
  subroutine init(n, x, y)
    integer, intent(in) :: n
    real(dp), intent(out) :: x(n), y(n)
    integer :: i
    !$acc parallel loop copyout(x(1:n), y(1:n))
    do i = 1, n
      x(i) = real(i - 1, dp) / real(n - 1, dp)
      y(i) = 1.0_dp - x(i)
    end do
  end subroutine init

  ! y = a*x + y: x is only read (copyin), y is read and written (copy).
  subroutine saxpy(n, a, x, y)
    integer, intent(in) :: n
    real(dp), intent(in) :: a, x(n)
    real(dp), intent(inout) :: y(n)
    integer :: i
    !$acc parallel loop copy(x(1:n), y(1:n))   ! DEFECT
    do i = 1, n
      y(i) = a * x(i) + y(i)
    end do
  end subroutine saxpy

end program saxpy_demo
