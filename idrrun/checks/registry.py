"""The check kinds: each one declared once, as a record (its spec fields, its evaluator, what it
needs, its words, how its points behave). Specs, evaluation, words and scoring read them here.

idrrun's own kinds are declared by what they read, in checks/output_kinds.py, program_kinds.py
and trace_kinds.py, and registered when the package is imported (checks/__init__.py); a kind of
one's own is one more record, `register(Kind(...))` (docs/architecture.md, "Add a check kind").
What a kind needs (a run, the solution's, the host's, a GPU, repeated runs) and what it shows
beside the solution's are its record's fields: nothing else compares kind names. The lists
made from the records (names, hidden_names, timed_names, gpu_names) are made when asked, so
that a kind registered later (a plug-in's) is among them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..model import CheckResult
    from .evidence import Evidence
    from .spec_fields import Table
    from .spec_values import CheckSpec

# What a kind reads: what the program printed or wrote (its run; evaluated again on each hidden
# run), the program itself (its source, the compiler's report, the regions its run executed),
# or the GPU trace of a profiled run (incomplete without one).
Reads = Literal["output", "program", "trace"]


@dataclass(frozen=True)
class TimedFigure:
    """Where a timed kind's figure is among a trace's values, and how it is shown: a time or a
    share of time depends on what else runs beside the program (checks/measure.py)."""

    key: str  # in profile.summary.trace_values
    bound: Callable[[CheckSpec], float | None]  # the spec's bound the figure is compared with
    scale: float = 1.0
    unit: str = ""

    def show(self, value: float) -> str:
        return f"{self.scale * value:.0f}{self.unit}"

    def spread(self, low: float, high: float) -> str:
        return f"{self.scale * low:.0f}–{self.scale * high:.0f}{self.unit}"


@dataclass(frozen=True)
class Kind:
    """One check kind.

    evaluate(spec, evidence) judges a run; a trace kind's trace(spec, values, evidence) judges
    the figures of a GPU trace (evidence None: a timed figure judged alone). fields(table)
    reads the [[check]] keys of its own (`keys`) into CheckSpec's fields by name."""

    name: str
    reads: Reads
    label: str  # what a student reads when the spec gives no label
    holds: str  # what a passed one says of the work, after "counts once" ({label}, {min})
    evaluate: Callable[[CheckSpec, Evidence], CheckResult] | None = None
    trace: Callable[[CheckSpec, Mapping[str, float], Evidence | None], CheckResult] | None = None
    fields: Callable[[Table], dict[str, Any]] | None = None
    keys: frozenset[str] = frozenset()
    needs_run: bool = False  # judges what a run produced: "incomplete" when not run (-n)
    needs_solution: bool = False  # compares with the solution's output or files
    model: str | None = None  # the programming model whose evidence it reads; None: any
    timed: TimedFigure | None = None  # its figure is a time or a share of time
    # Evaluated again on each hidden run, and may give hidden_points there (what the program
    # prints or writes for the arguments it was given).
    hidden_runs: bool = False
    # Compares the GPU's output with the same build's on the host (a run of its own there).
    needs_host: bool = False
    # The rows of the compiler's report its comparison with the solution shows (checks/
    # compare.py): "regions" (compute regions), "omp_targets" (OpenMP target regions),
    # "implicit" (the arrays moved implicitly).
    report_rows: frozenset[str] = frozenset()
    # Judged also when the program did not build (it reads the source only).
    judged_unbuilt: bool = False
    # Its label when the spec gives none, from what the spec names: (the name its pattern
    # prints, its exact line, its file) -> a label, or None for `label`.
    label_from: Callable[[str | None, str | None, str | None], str | None] | None = None
    # What the ladder of near-misses (grading/ladder.py) reads of a kind: it judges how the
    # program ended (a near-miss that crashes is no rung); its pattern names the hot loop (the
    # half port removes the construct around it); it scores the run's time (a slow rung may
    # tie the solution where no kind of the exercise does).
    judges_the_end: bool = False
    names_the_hot_loop: bool = False
    scores_time: bool = False
    # What the trace of a run stopped at its time limit already decides (a trace kind): the
    # result the rest of the run could not change (kernels seen, more data moved than the whole
    # run may move, a time past the scale's end), None where only the whole run can say.
    so_far: Callable[[CheckSpec, Mapping[str, float], Evidence], CheckResult | None] | None = None
    # It reads the compute regions the run executed (Evidence.regions): a run stopped at its
    # time limit is judged on those its record saw start (checks/verdict._regions_so_far).
    reads_regions: bool = False

    @property
    def needs_trace(self) -> bool:
        return self.reads == "trace"

    @property
    def needs_gpu(self) -> bool:
        """Only a GPU can judge it: a run built for the host has no GPU trace, and no GPU run
        to compare with the host's."""
        return self.needs_trace or self.needs_host


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> None:
    """Add a kind: specs accept it, grading evaluates it, words and scores know it."""
    if kind.reads == "trace" and kind.trace is None or kind.reads != "trace" and kind.evaluate is None:
        raise ValueError(f"check kind {kind.name}: a {kind.reads} kind needs "
                         f"{'trace' if kind.reads == 'trace' else 'evaluate'}")
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"check kind {kind.name} is already registered")
    _KINDS[kind.name] = kind


def unregister(name: str) -> None:
    _KINDS.pop(name, None)


def get(name: str) -> Kind | None:
    return _KINDS.get(name)


def all_kinds() -> tuple[Kind, ...]:
    return tuple(_KINDS.values())


def names(reads: Reads | None = None) -> tuple[str, ...]:
    """Every kind's name (those that read `reads`), in the order they were declared."""
    return tuple(k.name for k in all_kinds() if reads is None or k.reads == reads)


def hidden_names() -> tuple[str, ...]:
    """The kinds evaluated again on each hidden run."""
    return tuple(k.name for k in all_kinds() if k.hidden_runs)


def timed_names() -> tuple[str, ...]:
    return tuple(k.name for k in all_kinds() if k.timed is not None)


def gpu_names() -> tuple[str, ...]:
    """The kinds only a GPU can judge (Kind.needs_gpu), a plug-in's among them."""
    return tuple(k.name for k in all_kinds() if k.needs_gpu)


def kinds_of(names: Iterable[str]) -> tuple[Kind, ...]:
    """The registered kinds among `names` (each once, in the order given)."""
    return tuple(k for name in dict.fromkeys(names) if (k := get(name)) is not None)
