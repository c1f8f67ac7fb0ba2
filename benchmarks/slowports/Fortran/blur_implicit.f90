! Blur a gray picture with a 3x3 binomial stencil, several passes.
! Usage: ./blur [picture.pgm | n] [passes] [output.pgm]
! The picture is a binary PGM (P5, 8-bit), or n: an n x n test card made by
! the program. The edge pixels keep their value; the result is written to
! blur.pgm (or the name given).
!
! A data region around the passes keeps img and tmp on the device: the
! picture goes in once and comes back once, tmp never leaves the device.
! Both compute constructs say with present() that the data is there.
module pgm_io
  implicit none
contains
  ! the next number of a PGM header, skipping blanks and # comments
  integer function header_number(u) result(v)
    integer, intent(in) :: u
    character :: c
    integer :: ios, digits
    v = -1
    digits = 0
    do
      read(u, iostat=ios) c
      if (ios /= 0) return
      if (c == '#') then
        do while (c /= achar(10))
          read(u, iostat=ios) c
          if (ios /= 0) return
        end do
      else if (c /= ' ' .and. c /= achar(9) .and. c /= achar(10) .and. c /= achar(13)) then
        exit
      end if
    end do
    v = 0
    do while (c >= '0' .and. c <= '9')
      v = 10 * v + (ichar(c) - ichar('0'))
      digits = digits + 1
      read(u, iostat=ios) c   ! the one blank after the number is consumed
      if (ios /= 0) exit
    end do
    if (digits == 0) v = -1
  end function header_number

  subroutine read_pgm(name, img, w, h, ok)
    character(len=*), intent(in) :: name
    real, allocatable, intent(out) :: img(:,:)
    integer, intent(out) :: w, h
    logical, intent(out) :: ok
    character(len=2) :: magic
    character, allocatable :: raster(:)
    integer :: u, ios, maxval, x, y
    ok = .false.
    w = 0
    h = 0
    open(newunit=u, file=name, access='stream', form='unformatted', status='old', iostat=ios)
    if (ios /= 0) then
      write(*,'(a)') 'cannot open ' // trim(name)
      return
    end if
    read(u, iostat=ios) magic
    if (ios == 0 .and. magic == 'P5') then
      w = header_number(u)
      h = header_number(u)
      maxval = header_number(u)
      if (w >= 3 .and. h >= 3 .and. maxval == 255) then
        allocate(raster(w * h), img(w, h))
        read(u, iostat=ios) raster
        if (ios == 0) then
          do y = 1, h
            do x = 1, w
              img(x, y) = real(ichar(raster(x + (y - 1) * w)))
            end do
          end do
          ok = .true.
        end if
      end if
    end if
    close(u)
    if (.not. ok) write(*,'(a)') trim(name) // ': not an 8-bit binary PGM'
  end subroutine read_pgm

  ! squares of 32 pixels, light and dark, with a mid-gray disc in the middle
  subroutine test_card(n, img)
    integer, intent(in) :: n
    real, allocatable, intent(out) :: img(:,:)
    integer :: x, y, dx, dy
    allocate(img(n, n))
    do y = 0, n - 1
      do x = 0, n - 1
        dx = x - n / 2
        dy = y - n / 2
        if (4 * (dx * dx + dy * dy) < n * n / 4) then
          img(x + 1, y + 1) = 128.0
        else if (mod(x / 32 + y / 32, 2) == 1) then
          img(x + 1, y + 1) = 220.0
        else
          img(x + 1, y + 1) = 30.0
        end if
      end do
    end do
  end subroutine test_card

  subroutine write_pgm(name, img)
    character(len=*), intent(in) :: name
    real, intent(in) :: img(:,:)
    character(len=32) :: header
    character, allocatable :: raster(:)
    integer :: u, x, y, w, h
    w = size(img, 1)
    h = size(img, 2)
    allocate(raster(w * h))
    do y = 1, h
      do x = 1, w
        raster(x + (y - 1) * w) = achar(int(min(255.0, max(0.0, img(x, y) + 0.5))))
      end do
    end do
    write(header, '(a,i0,1x,i0,a)') 'P5' // achar(10), w, h, achar(10) // '255' // achar(10)
    open(newunit=u, file=name, access='stream', form='unformatted', status='replace')
    write(u) trim(header), raster
    close(u)
  end subroutine write_pgm
end module pgm_io

program blur
  use, intrinsic :: iso_fortran_env, only : int64
  use pgm_io
  implicit none
  real, allocatable :: img(:,:), tmp(:,:)
  character(len=256) :: input, output
  integer :: w, h, passes, p, x, y
  integer(int64) :: count0, count1, count_rate
  logical :: ok
  character(len=32) :: arg

  input = '256'
  passes = 10
  output = 'blur.pgm'
  if (command_argument_count() >= 1) call get_command_argument(1, input)
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) passes
  end if
  if (command_argument_count() >= 3) call get_command_argument(3, output)

  if (verify(trim(input), '0123456789') == 0) then
    read(input, *) w
    if (w < 3) then
      write(*,'(a)') 'the size must be at least 3'
      stop 1
    end if
    h = w
    call test_card(w, img)
  else
    call read_pgm(trim(input), img, w, h, ok)
    if (.not. ok) stop 1
  end if
  allocate(tmp(w, h))
  tmp(:,:) = img(:,:)   ! the edges of tmp stay those of img

  call system_clock(count0, count_rate)
  do p = 1, passes
    !$acc parallel loop collapse(2)   ! DEFECT
    do y = 2, h - 1
      do x = 2, w - 1
        tmp(x, y) = (4.0 * img(x, y) &
                     + 2.0 * (img(x, y - 1) + img(x, y + 1) + img(x - 1, y) + img(x + 1, y)) &
                     + img(x - 1, y - 1) + img(x + 1, y - 1) &
                     + img(x - 1, y + 1) + img(x + 1, y + 1)) / 16.0
      end do
    end do

    !$acc parallel loop collapse(2)
    do y = 2, h - 1
      do x = 2, w - 1
        img(x, y) = tmp(x, y)
      end do
    end do
  end do
  call system_clock(count1)

  call write_pgm(trim(output), img)
  write(*,'(a,i0,a,i0)') 'size = ', w, ' x ', h
  write(*,'(a,i0)') 'passes = ', passes
  write(*,'(a,f0.6)') 'mean = ', sum(real(img, kind(1.0d0))) / (real(w, kind(1.0d0)) * h)
  write(*,'(a,f0.4)') 'center = ', img(w / 2 + 1, h / 2 + 1)
  write(*,'(a,i0,a,i0,a,f0.4)') 'pixel(', w / 3, ',', h / 5, ') = ', img(w / 3 + 1, h / 5 + 1)
  write(*,'(a,a)') 'written = ', trim(output)
  write(*,'(a,f9.3,a)') 'time per pass = ', &
       1.0e3 * real(count1 - count0) / real(count_rate) / max(passes, 1), ' ms'
end program blur
