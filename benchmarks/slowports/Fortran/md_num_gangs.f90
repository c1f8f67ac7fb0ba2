! Molecular dynamics of a Lennard-Jones fluid: n atoms in a periodic cubic
! box, velocity Verlet time steps. Reduced units (sigma = epsilon = mass =
! 1); the interaction is cut at rc = 2.5 and the potential shifted so that
! it is 0 there. The atoms start on a cubic lattice at density 0.8 with
! velocities for a temperature of 1.0, from a deterministic generator.
! Usage: ./md [n] [steps]
! Velocity Verlet conserves the total energy up to a small drift: the
! program prints energy_drift = |E_end - E_start| / |E_start|. It writes
! the atoms seen along z at the start and at the end: md_start.pgm, md_end.pgm.
!
! The force loop runs on the accelerator as a gather: each iteration i adds
! the forces of all the other atoms on atom i into its own fx(i), fy(i),
! fz(i). No two iterations write the same place, so no atomics are needed;
! each pair is computed twice, once for each of its atoms, which the GPU
! has the threads for.
module lj
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), parameter :: rc = 2.5_dp, density = 0.8_dp, temperature0 = 1.0_dp, dt = 0.005_dp
contains
  ! the forces on every atom; returns the potential energy
  real(dp) function forces(n, box, x, y, z, fx, fy, fz) result(energy)
    integer, intent(in) :: n
    real(dp), intent(in) :: box, x(n), y(n), z(n)
    real(dp), intent(out) :: fx(n), fy(n), fz(n)
    real(dp) :: half, rc2, ecut, dx, dy, dz, r2, inv2, inv6, f, fxi, fyi, fzi, ei
    integer :: i, j
    half = 0.5_dp * box
    rc2 = rc * rc
    ecut = 4.0_dp * (rc**(-12) - rc**(-6))
    energy = 0.0_dp
    !$acc parallel loop reduction(+:energy) private(fxi, fyi, fzi, ei) &
    !$acc   num_gangs(8) copyin(x, y, z) copyout(fx, fy, fz)   ! DEFECT
    do i = 1, n
      fxi = 0.0_dp
      fyi = 0.0_dp
      fzi = 0.0_dp
      ei = 0.0_dp
      !$acc loop seq private(dx, dy, dz, r2, inv2, inv6, f)
      do j = 1, n
        if (j == i) cycle
        ! the nearest image of atom j
        dx = x(i) - x(j)
        dy = y(i) - y(j)
        dz = z(i) - z(j)
        if (dx > half) dx = dx - box
        if (dx < -half) dx = dx + box
        if (dy > half) dy = dy - box
        if (dy < -half) dy = dy + box
        if (dz > half) dz = dz - box
        if (dz < -half) dz = dz + box
        r2 = dx * dx + dy * dy + dz * dz
        if (r2 < rc2) then
          inv2 = 1.0_dp / r2
          inv6 = inv2 * inv2 * inv2
          f = 24.0_dp * inv2 * inv6 * (2.0_dp * inv6 - 1.0_dp)
          fxi = fxi + f * dx
          fyi = fyi + f * dy
          fzi = fzi + f * dz
          ei = ei + 0.5_dp * (4.0_dp * inv6 * (inv6 - 1.0_dp) - ecut)   ! half of the pair
        end if
      end do
      fx(i) = fxi
      fy(i) = fyi
      fz(i) = fzi
      energy = energy + ei
    end do
  end function forces

  real(dp) function kinetic(vx, vy, vz)
    real(dp), intent(in) :: vx(:), vy(:), vz(:)
    kinetic = 0.5_dp * (sum(vx**2) + sum(vy**2) + sum(vz**2))
  end function kinetic

  ! the atoms seen along z: a side x side PGM, each pixel the number of atoms
  ! in its column of the box (maxval: the largest count)
  subroutine write_projection(name, box, x, y)
    character(len=*), intent(in) :: name
    real(dp), intent(in) :: box, x(:), y(:)
    integer, parameter :: side = 100
    integer :: counts(side, side), i, c, r, u
    counts(:,:) = 0
    do i = 1, size(x)
      c = min(side, max(1, int(x(i) / box * side) + 1))
      r = min(side, max(1, int(y(i) / box * side) + 1))
      counts(c, r) = counts(c, r) + 1
    end do
    open(newunit=u, file=name, status='replace', action='write')
    write(u, '(a)') 'P2'
    write(u, '(i0,1x,i0)') side, side
    write(u, '(i0)') max(1, maxval(counts))
    do r = 1, side
      write(u, '(*(i0,:,1x))') counts(:, r)
    end do
    close(u)
  end subroutine write_projection
end module lj

program md
  use, intrinsic :: iso_fortran_env, only : int64
  use lj
  implicit none
  real(dp), allocatable :: x(:), y(:), z(:), vx(:), vy(:), vz(:), fx(:), fy(:), fz(:)
  real(dp) :: box, e0, e1, potential, k, scale
  integer :: n, steps, m, i, s
  integer(int64) :: seed, count0, count1, count_rate
  character(len=32) :: arg

  n = 500
  steps = 200
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) steps
  end if
  if (n < 2 .or. steps < 1) then
    write(*,'(a)') 'usage: md [n (>= 2)] [steps (>= 1)]'
    stop 1
  end if
  box = (n / density)**(1.0_dp / 3.0_dp)
  allocate(x(n), y(n), z(n), vx(n), vy(n), vz(n), fx(n), fy(n), fz(n))

  ! a cubic lattice of side m >= n**(1/3), and velocities from the
  ! Park-Miller generator with the total momentum removed
  m = 1
  do while (m * m * m < n)
    m = m + 1
  end do
  seed = 12345
  do i = 1, n
    x(i) = (mod(i - 1, m) + 0.5_dp) * box / m
    y(i) = (mod((i - 1) / m, m) + 0.5_dp) * box / m
    z(i) = ((i - 1) / (m * m) + 0.5_dp) * box / m
    vx(i) = uniform(seed)
    vy(i) = uniform(seed)
    vz(i) = uniform(seed)
  end do
  vx = vx - sum(vx) / n
  vy = vy - sum(vy) / n
  vz = vz - sum(vz) / n
  scale = sqrt(1.5_dp * n * temperature0 / kinetic(vx, vy, vz))
  vx = vx * scale
  vy = vy * scale
  vz = vz * scale

  potential = forces(n, box, x, y, z, fx, fy, fz)
  e0 = potential + kinetic(vx, vy, vz)
  write(*,'(a,i0)') 'atoms = ', n
  write(*,'(a,f0.6)') 'box = ', box
  write(*,'(a,f0.10)') 'energy_start = ', e0
  call write_projection('md_start.pgm', box, x, y)

  call system_clock(count0, count_rate)
  do s = 1, steps
    vx = vx + 0.5_dp * dt * fx
    vy = vy + 0.5_dp * dt * fy
    vz = vz + 0.5_dp * dt * fz
    x = x + dt * vx
    y = y + dt * vy
    z = z + dt * vz
    ! back into the box
    x = x - box * floor(x / box)
    y = y - box * floor(y / box)
    z = z - box * floor(z / box)
    potential = forces(n, box, x, y, z, fx, fy, fz)
    vx = vx + 0.5_dp * dt * fx
    vy = vy + 0.5_dp * dt * fy
    vz = vz + 0.5_dp * dt * fz
    if (mod(s, 50) == 0 .or. s == steps) then
      k = kinetic(vx, vy, vz)
      write(*,'(a,i0,a,f0.10,a,f8.6)') 'step ', s, ' energy = ', potential + k, &
           ' temperature = ', 2.0_dp * k / (3.0_dp * n)
    end if
  end do
  call system_clock(count1)

  e1 = potential + kinetic(vx, vy, vz)
  call write_projection('md_end.pgm', box, x, y)
  write(*,'(a,f0.10)') 'energy_end = ', e1
  write(*,'(a,es9.3)') 'energy_drift = ', abs(e1 - e0) / abs(e0)
  write(*,'(a,f9.3,a)') 'time per step = ', &
       1.0e3_dp * real(count1 - count0, dp) / real(count_rate, dp) / steps, ' ms'

contains

  ! uniform in [-0.5, 0.5), from the Park-Miller generator
  real(dp) function uniform(state)
    integer(int64), intent(inout) :: state
    state = mod(16807_int64 * state, 2147483647_int64)
    uniform = real(state, dp) / 2147483647.0_dp - 0.5_dp
  end function uniform
end program md
