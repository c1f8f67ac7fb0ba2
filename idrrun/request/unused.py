"""Flags typed on the line that can do nothing for this request: each gets a note (shown with the
toolchain's), so that nobody waits for an effect that cannot come. The flags stay accepted: the
IDRIS notebooks type them.

Elsewhere already: -g/--gpus without a launcher (run/launch.py), --accopts without -a
(toolchains), --profile where no GPU ran (profile/)."""

from __future__ import annotations

from ..model import RunRequest, Settings
from ..run.launch import launcher_for
from .options import Options, specs

# Compiler flags that turn OpenMP on by hand (--options), as -t does.
_OPENMP_FLAGS = ("-fopenmp", "-mp", "-qopenmp", "-openmp")


def _openmp_by_hand(flags: tuple[str, ...]) -> bool:
    return any(f in _OPENMP_FLAGS or f.startswith(tuple(o + "=" for o in _OPENMP_FLAGS))
               for f in flags)


def _spelled(field: str) -> str:
    """A flag as a note names it: its spellings, "-g/--gpus"."""
    return "/".join(dict(specs())[field].names)


def notes(options: Options, request: RunRequest, settings: Settings) -> tuple[str, ...]:
    if not request.execute or request.object_only:
        why = _spelled("object_only" if request.object_only else "execute")
        given = [_spelled(name) for name, spec in specs()
                 if spec.run_only and getattr(options, name) is not None]
        if given:
            return (f"{', '.join(given)}: no effect with {why}, the program is not run",)
        return ()
    out: list[str] = []
    launcher = launcher_for(request, settings)
    if options.threads is not None and not request.openmp and \
            not _openmp_by_hand(request.compiler_options) and not (launcher and launcher.threads):
        out.append("--threads sets OMP_NUM_THREADS, which only an OpenMP build reads: without "
                   "-t it has no effect")
    return tuple(out)
