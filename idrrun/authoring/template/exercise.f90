! {{title}}
! Usage: ./{{name}} [n]
! Task: compute dot on the accelerator (OpenACC), every array in an explicit data clause.
program main
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer :: n, i
  real(dp), allocatable :: x(:), y(:)
  real(dp) :: dot
  character(len=32) :: arg

  n = 1000000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (n < 1) then
    write(*,'(a)') 'n must be positive'
    stop 1
  end if
  allocate(x(n), y(n))
  do i = 1, n
    x(i) = real(mod(i - 1, 13), dp)
    y(i) = 0.5_dp * real(mod(i - 1, 7), dp)
  end do

  dot = 0.0_dp
  do i = 1, n
    dot = dot + x(i) * y(i)
  end do

  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,f0.1)') 'dot = ', dot
  deallocate(x, y)
end program main
