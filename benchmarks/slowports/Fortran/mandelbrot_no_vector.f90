! The Mandelbrot set on a w x h grid of the complex plane, written as a PGM
! picture: black inside the set, brighter outside where more iterations were
! needed to escape.
! Usage: ./mandelbrot [w] [max_iter] [output.pgm]
! The rows do not cost the same: a row that crosses the set runs max_iter
! iterations at many of its pixels, a row near the top or the bottom a few.
! The program prints how the iterations are spread over 8 bands of rows.
!
! One gang per row, the pixels of a row on the vector lanes: the GPU hands
! out rows to its multiprocessors as they become free, so cheap and costly
! rows even out. Only the iteration counts come back (copyout).
program mandelbrot
  use, intrinsic :: iso_fortran_env, only : int64
  implicit none
  integer, parameter :: dp = kind(1.0d0), bands = 8
  integer, allocatable :: iters(:,:)
  character, allocatable :: picture(:,:)
  real(dp) :: x0, y0, dx, dy, cx, cy, zx, zy, x2, y2
  integer :: w, h, max_iter, i, j, it, b, u
  integer(int64) :: total, inside, band(0:bands-1), count0, count1, count_rate
  character(len=256) :: output
  character(len=32) :: arg, header

  w = 640
  max_iter = 256
  output = 'mandelbrot.pgm'
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) w
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) max_iter
  end if
  if (command_argument_count() >= 3) call get_command_argument(3, output)
  if (w < 8 .or. max_iter < 1) then
    write(*,'(a)') 'usage: mandelbrot [w (>= 8)] [max_iter (>= 1)] [output.pgm]'
    stop 1
  end if
  h = w * 4 / 5
  ! the plane from -2.2 - 1.2i to 0.8 + 1.2i
  x0 = -2.2_dp
  y0 = -1.2_dp
  dx = 3.0_dp / w
  dy = 2.4_dp / h
  allocate(iters(w, h))

  call system_clock(count0, count_rate)
  !$acc parallel loop gang copyout(iters) private(cx, cy, zx, zy, x2, y2, it)
  do j = 1, h
    do i = 1, w   ! DEFECT
      cx = x0 + (i - 0.5_dp) * dx
      cy = y0 + (j - 0.5_dp) * dy
      zx = 0.0_dp
      zy = 0.0_dp
      it = 0
      do while (it < max_iter)
        x2 = zx * zx
        y2 = zy * zy
        if (x2 + y2 > 4.0_dp) exit
        zy = 2.0_dp * zx * zy + cy
        zx = x2 - y2 + cx
        it = it + 1
      end do
      iters(i, j) = it
    end do
  end do
  call system_clock(count1)

  total = 0
  inside = 0
  band(:) = 0
  allocate(picture(w, h))
  do j = 1, h
    do i = 1, w
      it = iters(i, j)
      total = total + it
      b = int((int(j - 1, int64) * bands) / h)
      band(b) = band(b) + it
      if (it == max_iter) then
        inside = inside + 1
        picture(i, j) = achar(0)
      else
        picture(i, j) = achar(int(255.0_dp * log(1.0_dp + it) / log(1.0_dp + max_iter)))
      end if
    end do
  end do
  write(header, '(a,i0,1x,i0,a)') 'P5' // achar(10), w, h, achar(10) // '255' // achar(10)
  open(newunit=u, file=trim(output), access='stream', form='unformatted', status='replace')
  write(u) trim(header), picture
  close(u)

  write(*,'(a,i0,a,i0)') 'size = ', w, ' x ', h
  write(*,'(a,i0)') 'max_iter = ', max_iter
  write(*,'(a,i0)') 'inside = ', inside
  write(*,'(a,i0)') 'iterations = ', total
  do b = 0, bands - 1
    write(*,'(a,i0,a,i0,a,f4.1,a)') 'band ', b, ' iterations = ', band(b), &
         ' (', 100.0_dp * band(b) / total, '%)'
  end do
  write(*,'(a,a)') 'written = ', trim(output)
  write(*,'(a,f8.3,a)') 'time = ', real(count1 - count0, dp) / real(count_rate, dp), ' s'
end program mandelbrot
