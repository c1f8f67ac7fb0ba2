! ln 2 = integral of 1/(1+x) over [0, 1], by the midpoint rule on n points.
! Usage: mpirun -np R ./integral [n]
!
! The program starts MPI, but every rank computes all the points on the
! host, and rank 0 prints its own result.
! To do:
!  - count the NVIDIA GPUs; when there is at least one, give rank r the GPU
!    mod(r, ndevices) and read back the device number the runtime uses;
!    without any, every rank stays on the host (ndevices = 0);
!  - give each rank its own block of the n points, the blocks following each
!    other in rank order;
!  - compute f and its sum on the device, f living there only, with no
!    implicit data movement;
!  - add the ranks' sums on rank 0.
program integral
  use, intrinsic :: iso_fortran_env, only : int64
  use mpi
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), allocatable :: f(:)
  real(dp) :: h, x, part, total, t0, t1
  integer(int64) :: n, first, count, i
  integer(int64) :: mine(4)
  integer(int64), allocatable :: all(:)
  integer :: rank, nranks, ndevices, device, r, ierr
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  n = 4000000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (n < nranks) then
    if (rank == 0) write(*,'(a)') 'usage: integral [n (at least one point per rank)]'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if

  ! TODO: ask the OpenACC runtime (-1: not asked yet)
  ndevices = -1
  device = -1

  ! TODO: this rank's points only
  first = 0
  count = n
  h = 1.0_dp / n
  allocate(f(count))

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
  part = 0.0_dp
  ! TODO: on the device
  do i = 1, count
    x = (first + i - 0.5_dp) * h
    f(i) = 1.0_dp / (1.0_dp + x)
  end do
  do i = 1, count
    part = part + h * f(i)
  end do
  ! TODO: the sum of every rank's part, on rank 0
  total = part
  t1 = MPI_Wtime()

  ! Rank 0 prints every rank's device and block, in rank order.
  mine = [int(device, int64), int(ndevices, int64), first, count]
  allocate(all(4 * nranks))
  call MPI_Gather(mine, 4, MPI_INTEGER8, all, 4, MPI_INTEGER8, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    write(*,'(a,i0)') 'ranks = ', nranks
    do r = 0, nranks - 1
      if (all(4*r + 2) == 0) then
        write(*,'(a,i0,a)', advance='no') 'rank ', r, ' -> host, '
      else
        write(*,'(a,i0,a,i0,a,i0,a)', advance='no') 'rank ', r, ' -> device ', all(4*r + 1), &
          ' of ', all(4*r + 2), ', '
      end if
      write(*,'(a,i0,a,i0,a)') 'points [', all(4*r + 3), ', ', all(4*r + 3) + all(4*r + 4), ')'
    end do
    write(*,'(a,f14.12)') 'ln2 = ', total
    write(*,'(a,f6.3,a)') 'time = ', t1 - t0, ' s'
  end if
  deallocate(f, all)
  call MPI_Finalize(ierr)
end program integral
