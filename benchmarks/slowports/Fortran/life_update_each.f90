! Conway's Game of Life on an n x n grid, surrounded by a frame of cells that
! stay dead. A live cell with 2 or 3 live neighbours lives on, a dead cell
! with exactly 3 comes to life, every other cell is dead at the next
! generation.
! Usage: ./life [n] [generations] [pictures]
! The program writes life_0.pgm ... life_K.pgm (K = pictures): the top-left
! corner of the grid (at most 256 x 256 cells) at generations 0, G/K, 2G/K,
! ..., G, and prints the population at those generations.
!
! The two grids are the two planes of one array, grid(:,:,cur) and
! grid(:,:,nxt); swapping them swaps two indices. The array stays on the
! device for the whole run: a data region copies it in once (the frames
! must be dead there too), the compute constructs find it with present(),
! and `update self` brings back the current plane only when a picture is
! written.
program life
  use, intrinsic :: iso_fortran_env, only : int8, int64
  implicit none
  integer, parameter :: corner = 256
  integer(int8), allocatable :: grid(:,:,:)
  integer :: n, generations, pictures, shown, g, x, y, s, cur, nxt
  integer(int64) :: population, count0, count1, count_rate
  character(len=32) :: arg

  n = 256
  generations = 100
  pictures = 4
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) generations
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read(arg, *) pictures
  end if
  if (n < 3 .or. generations < 1 .or. pictures < 1 .or. pictures > 9) then
    write(*,'(a)') 'usage: life [n (>= 3)] [generations (>= 1)] [pictures (1-9)]'
    stop 1
  end if

  allocate(grid(0:n+1, 0:n+1, 0:1))
  grid(:,:,:) = 0_int8
  do y = 1, n
    do x = 1, n
      if (alive_at_start(y, x)) grid(x, y, 0) = 1_int8
    end do
  end do
  cur = 0
  nxt = 1
  shown = 0
  population = 0

  call system_clock(count0, count_rate)
  !$acc data copyin(grid)
  do g = 0, generations
    !$acc update self(grid(:,:,cur))   ! DEFECT
    if (int(g, int64) * pictures >= int(shown, int64) * generations) then
      ! a picture and the population every generations/pictures
      population = 0
      !$acc parallel loop collapse(2) reduction(+:population) present(grid)
      do y = 1, n
        do x = 1, n
          population = population + grid(x, y, cur)
        end do
      end do
      call write_picture(grid(:,:,cur), n, shown)
      write(*,'(a,i0,a,i0)') 'generation ', g, ' population = ', population
      shown = shown + 1
    end if
    if (g == generations) exit

    !$acc parallel loop collapse(2) private(s) present(grid)
    do y = 1, n
      do x = 1, n
        s = grid(x-1, y-1, cur) + grid(x, y-1, cur) + grid(x+1, y-1, cur) &
          + grid(x-1, y,   cur)                     + grid(x+1, y,   cur) &
          + grid(x-1, y+1, cur) + grid(x, y+1, cur) + grid(x+1, y+1, cur)
        if (s == 3 .or. (s == 2 .and. grid(x, y, cur) == 1)) then
          grid(x, y, nxt) = 1_int8
        else
          grid(x, y, nxt) = 0_int8
        end if
      end do
    end do

    cur = nxt
    nxt = 1 - cur
  end do
  !$acc end data
  call system_clock(count1)

  write(*,'(a,i0,a,i0)') 'size = ', n, ' x ', n
  write(*,'(a,i0)') 'generations = ', generations
  write(*,'(a,i0)') 'population = ', population
  write(*,'(a,f9.3,a)') 'time per generation = ', &
       1.0e3 * real(count1 - count0) / real(count_rate) / generations, ' ms'

contains

  ! about 30% of the cells alive, from a hash of their position: the same
  ! start on every machine and in every order (32-bit unsigned arithmetic)
  logical function alive_at_start(i, j)
    integer, intent(in) :: i, j
    integer(int64), parameter :: mask = 4294967295_int64, mult = 73244475_int64
    integer(int64) :: h
    h = int(i, int64) * 65536_int64 + j
    h = iand(ieor(shiftr(h, 16), h) * mult, mask)
    h = iand(ieor(shiftr(h, 16), h) * mult, mask)
    h = ieor(shiftr(h, 16), h)
    alive_at_start = mod(h, 100_int64) < 30
  end function alive_at_start

  subroutine write_picture(plane, n, index)
    integer, intent(in) :: n, index
    integer(int8), intent(in) :: plane(0:n+1, 0:n+1)
    character(len=16) :: name
    character(len=32) :: header
    integer :: u, side
    side = min(n, corner)
    write(name, '(a,i0,a)') 'life_', index, '.pgm'
    write(header, '(a,i0,1x,i0,a)') 'P5' // achar(10), side, side, achar(10) // '1' // achar(10)
    open(newunit=u, file=trim(name), access='stream', form='unformatted', status='replace')
    write(u) trim(header), plane(1:side, 1:side)
    close(u)
  end subroutine write_picture
end program life
