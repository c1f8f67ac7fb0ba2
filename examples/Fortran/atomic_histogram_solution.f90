! Histogram of pseudo-random values, filled on the accelerator with atomic
! updates.
! Usage: ./histogram [samples] [bins]
! Each value is the mean of 4 numbers from the Park-Miller generator, so the
! values lie in [0,1) and pile up around 0.5. The generator is deterministic:
! the counts are the same on every machine.
program atomic_histogram
    implicit none
    integer(8), parameter :: modulus = 2147483647_8   ! 2^31 - 1
    integer(8), parameter :: multiplier = 16807_8
    integer :: n, nbins, i, r, b, total, highest, width
    real(8), allocatable :: x(:)
    integer, allocatable :: hist(:)
    integer(8) :: s, c0, c1, rate
    real(8) :: sum4

    n = int_arg(1, 4000000)
    nbins = int_arg(2, 16)

    allocate(x(n), hist(0:nbins - 1))

    ! the values, on the host
    s = 1
    do i = 1, n
        sum4 = 0.0d0
        do r = 1, 4
            s = mod(multiplier * s, modulus)
            sum4 = sum4 + real(s, 8) / real(modulus, 8)
        end do
        x(i) = sum4 / 4.0d0
    end do

    hist = 0

    call system_clock(c0, rate)

    ! Many iterations may hit the same bin at the same time: the increment
    ! must be atomic.
    !$acc parallel loop private(b) copyin(x) copy(hist)
    do i = 1, n
        b = int(x(i) * nbins)
        !$acc atomic update
        hist(b) = hist(b) + 1
    end do

    call system_clock(c1)

    total = sum(hist)
    highest = maxval(hist)

    write(*, '("samples = ", i0)') n
    write(*, '("nbins = ", i0)') nbins
    do b = 0, nbins - 1
        width = 0
        if (highest > 0) width = int(50_8 * hist(b) / highest)
        if (width > 0) then
            write(*, '("bin ", i2, " = ", i8, 2x, a)') b, hist(b), repeat('*', width)
        else
            write(*, '("bin ", i2, " = ", i8)') b, hist(b)
        end if
    end do
    write(*, '("total = ", i0)') total
    write(*, '("time = ", f9.3, " s")') real(c1 - c0, 8) / real(rate, 8)

    deallocate(x, hist)

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

end program atomic_histogram
