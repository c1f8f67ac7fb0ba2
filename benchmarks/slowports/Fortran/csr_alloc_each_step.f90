! Diffusion along a line of n cells: steps of u <- u - dt * (L u), where L,
! the 1-D Laplacian with insulated ends, is a sparse matrix in CSR format:
! a derived type that holds its size and three allocatable arrays.
! Usage: ./diffusion [n [steps]]
!
! The matrix goes to the device once, by a manual deep copy: first the
! variable of derived type itself, then each of its allocatable components.
! Copying a component while the parent is on the device also attaches it:
! the device copy of the parent then holds the device address of the array.
! At the end, the components leave first (which detaches them), then the
! parent.
module sparse
  implicit none
  integer, parameter :: dp = kind(1.0d0)

  type csr
    integer :: nrows = 0
    integer :: nnz = 0
    integer, allocatable :: rowptr(:)  ! nrows + 1: row i is entries rowptr(i) .. rowptr(i+1)-1
    integer, allocatable :: col(:)     ! nnz column numbers
    real(dp), allocatable :: val(:)    ! nnz values
  end type csr

contains

  ! L for n cells: 2 on the diagonal, -1 beside it, and 1 on the diagonal of
  ! the two end rows (no flux through the ends, so the total is kept).
  subroutine laplacian(a, n)
    type(csr), intent(out) :: a
    integer, intent(in) :: n
    integer :: i, k

    a%nrows = n
    a%nnz = 3 * n - 2
    allocate(a%rowptr(n + 1), a%col(a%nnz), a%val(a%nnz))
    k = 1
    do i = 1, n
      a%rowptr(i) = k
      if (i > 1) then
        a%col(k) = i - 1
        a%val(k) = -1.0_dp
        k = k + 1
      end if
      a%col(k) = i
      if (i == 1 .or. i == n) then
        a%val(k) = 1.0_dp
      else
        a%val(k) = 2.0_dp
      end if
      k = k + 1
      if (i < n) then
        a%col(k) = i + 1
        a%val(k) = -1.0_dp
        k = k + 1
      end if
    end do
    a%rowptr(n + 1) = k
  end subroutine laplacian

  ! y = A x, on the device: a, and the arrays it holds, are there already.
  subroutine spmv(a, x, y, n)
    type(csr), intent(in) :: a
    integer, intent(in) :: n
    real(dp), intent(in) :: x(n)
    real(dp), intent(out) :: y(n)
    real(dp) :: total
    integer :: i, k

    !$acc parallel loop present(a, x, y) private(total)
    do i = 1, n
      total = 0.0_dp
      do k = a%rowptr(i), a%rowptr(i + 1) - 1
        total = total + a%val(k) * x(a%col(k))
      end do
      y(i) = total
    end do
  end subroutine spmv

end module sparse

program diffusion
  use, intrinsic :: iso_fortran_env, only : int64
  use sparse
  implicit none
  real(dp), parameter :: dt = 0.25_dp  ! stable: the eigenvalues of L lie in [0, 4]
  type(csr) :: a
  real(dp), allocatable :: u(:), lu(:)
  real(dp) :: mass0, mass, energy
  integer :: n, steps, i, s
  integer(int64) :: count0, count1, count_rate
  character(len=32) :: arg

  n = 100000
  steps = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) steps
  end if
  if (n < 2 .or. steps < 0) then
    write(*,'(a)') 'usage: diffusion [n (>1) [steps (>=0)]]'
    stop 1
  end if

  call laplacian(a, n)
  allocate(u(n), lu(n))
  u(:) = 0.0_dp
  u(1:n/2) = 1.0_dp
  mass0 = sum(u)

  call system_clock(count0, count_rate)
  ! The deep copy: the parent, then its components (attached as they arrive).
  !$acc enter data copyin(a)
  !$acc enter data copyin(a%rowptr, a%col, a%val)
  !$acc enter data copyin(u)

  do s = 1, steps
    !$acc enter data create(lu)   ! DEFECT
    call spmv(a, u, lu, n)
    !$acc parallel loop present(u, lu)
    do i = 1, n
      u(i) = u(i) - dt * lu(i)
    end do
    !$acc exit data delete(lu)
  end do

  mass = 0.0_dp
  energy = 0.0_dp
  !$acc parallel loop present(u) reduction(+:mass, energy)
  do i = 1, n
    mass = mass + u(i)
    energy = energy + u(i) * u(i)
  end do

  ! In reverse order: the components (detached from a's device copy), then a.
  !$acc exit data copyout(u)
  !$acc exit data delete(a%rowptr, a%col, a%val)
  !$acc exit data delete(a)
  call system_clock(count1)

  write(*,'(a,i0,a,i0,a,i0)') 'n = ', n, ', steps = ', steps, ', nonzeros = ', a%nnz
  write(*,'(a,es10.3)') 'mass drift = ', abs(mass - mass0) / mass0
  write(*,'(a,f0.12)') 'energy = ', energy
  write(*,'(a,f14.12)') 'u(1) = ', u(1)
  write(*,'(a,f14.12)') 'u(mid) = ', u(n/2 + 1)
  write(*,'(a,f8.3,a)') 'time = ', real(count1 - count0, dp) / count_rate, ' s'
  deallocate(u, lu)
end program diffusion
