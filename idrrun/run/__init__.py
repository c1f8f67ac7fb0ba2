"""Running things, bottom up: proc (the only place that starts processes) and the guard; the
jail of one run and the machine's protections (isolation); the box of a graded run (sandbox),
the boundary the grader keeps with it (boundary, tools, rooms); and the launch command
(mpirun, srun, profiler). Nothing here imports from above: requests, checks, grading, the
front ends (tests/test_layout.py).
"""
