! Laplace equation on a 2D grid, Jacobi iterations, tiled OpenACC loops.
! Usage: ./laplace [nx] [ny] [iterations]
! The edge j = 1 is held at 100, the other edges at 0; the interior starts at 0.
! Each sweep computes the new interior from the 4 neighbours and the largest
! change ("error"); the solution runs both sweeps on the accelerator with
! tile(32,32) and a max reduction.
program laplace_tiled
    implicit none
    integer :: nx, ny, niter, report, i, j, it
    real(8), allocatable :: T(:,:), Tnew(:,:)
    real(8) :: error
    integer(8) :: c0, c1, rate

    nx = int_arg(1, 258)
    ny = int_arg(2, 258)
    niter = int_arg(3, 1000)
    report = max(niter / 10, 1)

    allocate(T(nx, ny), Tnew(nx, ny))
    T = 0.0d0
    Tnew = 0.0d0
    T(:, 1) = 100.0d0

    error = 0.0d0
    call system_clock(c0, rate)

    !$acc data copy(T) copyin(Tnew)
    do it = 1, niter
        error = 0.0d0

        !$acc parallel loop reduction(max:error) present(T, Tnew)   ! DEFECT
        do j = 2, ny - 1
            do i = 2, nx - 1
                Tnew(i, j) = 0.25d0 * (T(i + 1, j) + T(i - 1, j) &
                                     + T(i, j + 1) + T(i, j - 1))
                error = max(error, abs(Tnew(i, j) - T(i, j)))
            end do
        end do

        !$acc parallel loop present(T, Tnew)
        do j = 2, ny - 1
            do i = 2, nx - 1
                T(i, j) = Tnew(i, j)
            end do
        end do

        if (mod(it, report) == 0) write(*, '("iteration ", i6, "   error = ", es12.6)') it, error
    end do
    !$acc end data

    call system_clock(c1)
    write(*, '("grid = ", i0, " x ", i0)') nx, ny
    write(*, '("iterations = ", i0)') niter
    write(*, '("error = ", es12.6)') error
    write(*, '("mean T = ", es12.6)') sum(T) / (real(nx, 8) * ny)
    write(*, '("time = ", f9.3, " s")') real(c1 - c0, 8) / real(rate, 8)

    deallocate(T, Tnew)

contains

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

end program laplace_tiled
