"""Running things: proc (the only place that starts processes), the guard and the jail of one run,
the machine's protections (isolation), and the launch command (mpirun, srun, profiler).
"""
