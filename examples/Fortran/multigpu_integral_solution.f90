! ln 2 = integral of 1/(1+x) over [0, 1], by the midpoint rule on n points,
! the points shared out among the MPI ranks and each rank on its own GPU.
! Usage: mpirun -np R ./integral [n]
!
! Rank r takes GPU mod(r, ndevices): with fewer GPUs than ranks, they are
! shared in turn. Without an NVIDIA GPU, acc_get_num_devices says 0 and every
! rank computes on the host. Each rank keeps f, its block of the values, on
! its device only, sums it there, and rank 0 adds the ranks' sums with MPI.
program integral
  use, intrinsic :: iso_fortran_env, only : int64
  use mpi
  use openacc
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

  ! Asking for a device of a type the machine lacks stops the program
  ! (libgomp: "device type nvidia not supported"), so count them first.
  ndevices = acc_get_num_devices(acc_device_nvidia)
  device = -1
  if (ndevices > 0) then
    call acc_set_device_num(mod(rank, ndevices), acc_device_nvidia)
    device = acc_get_device_num(acc_device_nvidia)
  end if

  ! This rank's points: global indices first+1 .. first+count of 1 .. n.
  first = n * rank / nranks
  count = n * (rank + 1) / nranks - first
  h = 1.0_dp / n
  allocate(f(count))

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
  part = 0.0_dp
  !$acc data create(f)
  !$acc parallel loop present(f) private(x)
  do i = 1, count
    x = (first + i - 0.5_dp) * h
    f(i) = 1.0_dp / (1.0_dp + x)
  end do
  !$acc parallel loop present(f) reduction(+:part)
  do i = 1, count
    part = part + h * f(i)
  end do
  !$acc end data
  call MPI_Reduce(part, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
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
