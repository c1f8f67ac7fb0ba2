"""Where the GPU time went: a run under Nsight Systems or the built-in CUPTI tracer, then a
summary, hints, achieved rates and a timeline of what the GPU did (stages.plan before the run,
stages.collect after; see stages.py; running.ProfileSession, the value between them).

Kept free of imports so that the values (profile.model) load without the profilers' machinery.
"""
