! One Gram-Schmidt step on two vectors: u = (1, 1, ..., 1) and
! v = (1, 2, ..., n); v loses its component along u: v <- v - (u.v / u.u) u.
! Usage: ./gram [n]
!
! The vec_ routines play the part of a GPU library (cuBLAS, a CUDA kernel):
! they are meant to receive device addresses, and to use them as they are.
! As written, their regions do not say so, and the program hands them host
! addresses, so on a GPU they read and write where they must not.
! To do:
!  - in the vec_ routines, declare that their dummy arrays are device
!    addresses;
!  - in orthogonalize, call them with the device addresses of u and v.
! Expected: afterwards u.v = 0, and |v|^2 = n (n^2 - 1) / 12, the sum of
! the squares of 1..n around their mean (n + 1) / 2.
module veclib
  implicit none
  integer, parameter :: dp = kind(1.0d0)

contains

  ! ---- the "library": meant for device addresses ----

  function vec_dot(n, x, y) result(total)
    integer, intent(in) :: n
    real(dp), intent(in) :: x(n), y(n)
    real(dp) :: total
    integer :: i

    total = 0.0_dp
    ! TODO: x and y are device addresses
    !$acc parallel loop reduction(+:total)
    do i = 1, n
      total = total + x(i) * y(i)
    end do
  end function vec_dot

  ! the Euclidean norm of x
  function vec_nrm2(n, x) result(norm)
    integer, intent(in) :: n
    real(dp), intent(in) :: x(n)
    real(dp) :: norm, total
    integer :: i

    total = 0.0_dp
    ! TODO: x is a device address
    !$acc parallel loop reduction(+:total)
    do i = 1, n
      total = total + x(i) * x(i)
    end do
    norm = sqrt(total)
  end function vec_nrm2

  ! y <- y + alpha x
  subroutine vec_axpy(n, alpha, x, y)
    integer, intent(in) :: n
    real(dp), intent(in) :: alpha
    real(dp), intent(in) :: x(n)
    real(dp), intent(inout) :: y(n)
    integer :: i

    ! TODO: x and y are device addresses
    !$acc parallel loop
    do i = 1, n
      y(i) = y(i) + alpha * x(i)
    end do
  end subroutine vec_axpy

end module veclib

module gram_schmidt
  use veclib
  implicit none

contains

  subroutine orthogonalize(n, u, v)
    integer, intent(in) :: n
    real(dp), intent(in) :: u(n)
    real(dp), intent(inout) :: v(n)
    real(dp) :: nu

    !$acc data copyin(u) copy(v)
    ! TODO: the library needs the device addresses of u and v
    nu = vec_nrm2(n, u)
    call vec_axpy(n, -vec_dot(n, u, v) / nu**2, u, v)
    !$acc end data
  end subroutine orthogonalize

end module gram_schmidt

program gram
  use, intrinsic :: iso_fortran_env, only : int64
  use gram_schmidt
  implicit none
  real(dp), allocatable :: u(:), v(:)
  real(dp) :: uv, uu, vv, expected
  integer :: n, i
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 2000000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (n < 2) then
    write(*,'(a)') 'usage: gram [n (>1)]'
    stop 1
  end if
  allocate(u(n), v(n))
  do i = 1, n
    u(i) = 1.0_dp
    v(i) = i
  end do

  call system_clock(count0, count_rate)
  call orthogonalize(n, u, v)
  call system_clock(count1)

  ! Checked on the host, from the v that came back.
  uv = dot_product(u, v)
  uu = dot_product(u, u)
  vv = dot_product(v, v)
  expected = real(n, dp) * (real(n, dp)**2 - 1.0_dp) / 12.0_dp
  write(*,'(a,i0)') 'n = ', n
  write(*,'(a,es10.3)') 'cosine = ', uv / sqrt(uu * vv)
  write(*,'(a,f14.12)') 'ratio = ', vv / expected
  write(*,'(a,f0.6)') 'v(1) = ', v(1)
  write(*,'(a,f8.3,a)') 'time = ', real(count1 - count0, dp) / count_rate, ' s'
  deallocate(u, v)
end program gram
