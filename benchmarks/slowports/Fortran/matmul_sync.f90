! Matrix product C = A x B with the matrices created and initialised on the
! accelerator, each on its own asynchronous queue.
! Usage: ./matmul [dim]
! A is 6 on the diagonal, B is 7 on the diagonal and C starts at zero, so
! every diagonal element of the result is 42.
! The printed labels are those of the C version: C[0] is C(1,1) and
! C[last] is C(dim,dim).
program async_matmul
    implicit none
    integer :: dim, i, j, k
    real(8), allocatable :: A(:,:), B(:,:), C(:,:)
    real(8) :: total
    integer(8) :: c0, c1, rate

    dim = int_arg(1, 200)

    call system_clock(c0, rate)

    call create_mat(A, dim, 1)
    call create_mat(B, dim, 2)
    call create_mat(C, dim, 3)

    call init_mat(A, dim, 6.0d0, 1)
    call init_mat(B, dim, 7.0d0, 2)
    call init_mat(C, dim, 0.0d0, 3)

    ! The product may start only when the three queues are done.
    !$acc parallel loop collapse(2) private(total) present(A, B, C)
    do j = 1, dim
        do i = 1, dim
            total = 0.0d0
            !$acc loop seq
            do k = 1, dim
                total = total + A(i, k) * B(k, j)
            end do
            C(i, j) = C(i, j) + total
        end do
    end do

    !$acc exit data copyout(C) delete(A, B)

    call system_clock(c1)
    write(*, '("dim = ", i0)') dim
    write(*, '("C[0] = ", f0.6)') C(1, 1)
    write(*, '("C[last] = ", f0.6)') C(dim, dim)
    write(*, '("time = ", f9.3, " s")') real(c1 - c0, 8) / real(rate, 8)

    deallocate(A, B, C)

contains

    ! Allocate a dim x dim matrix on the host and its copy on the device;
    ! the device allocation is queued on `queue`.
    subroutine create_mat(mat, dim, queue)
        real(8), allocatable, intent(inout) :: mat(:,:)
        integer, intent(in) :: dim, queue
        allocate(mat(dim, dim))
        !$acc enter data create(mat)
    end subroutine create_mat

    ! Set the device copy to diag on the diagonal and 0 elsewhere, on `queue`.
    subroutine init_mat(mat, dim, diag, queue)
        integer, intent(in) :: dim, queue
        real(8), intent(inout) :: mat(dim, dim)
        real(8), intent(in) :: diag
        integer :: i, j
        !$acc parallel loop collapse(2) present(mat)   ! DEFECT
        do j = 1, dim
            do i = 1, dim
                if (i == j) then
                    mat(i, j) = diag
                else
                    mat(i, j) = 0.0d0
                end if
            end do
        end do
    end subroutine init_mat

    ! The n-th command-line argument as an integer, or fallback when it is absent.
    integer function int_arg(n, fallback)
        integer, intent(in) :: n, fallback
        character(len=32) :: text
        integer :: length, status
        call get_command_argument(n, text, length, status)
        if (status /= 0 .or. length == 0) then
            int_arg = fallback
        else
            read(text, *) int_arg
        end if
    end function int_arg

end program async_matmul
