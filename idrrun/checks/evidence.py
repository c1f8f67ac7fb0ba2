"""What the checks look at (`Evidence`: what a run, its build and the solution's produced), and
the words the check kinds share to say what they found: a number as printed, an excerpt of the
output around what a check read, how a program ended. Pure: no processes.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..model import AccReport, BuildResult, ProcResult, RegionsRan, RunResult
from ..toolchains.diagnostics import rename_temporary
from . import regex
from .directives import code_text
from .specs import CheckSpec


@dataclass(frozen=True)
class HostComparison:
    """What the agrees_with_host check compares: the program's output at the exercise's host
    arguments on the GPU, and the same build's with its regions on the host; or why not."""

    device_output: str | None = None
    host_output: str | None = None
    problem: str = ""  # why an output is None


@dataclass(frozen=True)
class Evidence:
    """What the checks look at; each part is None when that step did not happen."""

    source_text: str
    language: str
    build: BuildResult | None
    run: RunResult | None
    acc: AccReport | None
    solution_output: str | None  # the solution's output, same arguments
    solution_problem: str = ""  # why solution_output is None, when it is
    # From the GPU trace of a profiled GPU run (profile.trace_values); None: no trace.
    trace_values: Mapping[str, float] | None = None
    trace_problem: str = ""  # why there is no trace, when the run's profiler says
    # The source as the compiler read it (build.PREPROCESSED), when the family can say.
    compiled_text: str | None = None
    acc_requested: bool = True  # built with -a: the OpenACC checks mean something
    run_dir: Path | None = None  # where the program ran (its files, for image checks)
    solution_dir: Path | None = None  # the solution's files for the same arguments
    # Files of the solution's that the course's reference does not keep, with why.
    solution_left_out: tuple[str, ...] = ()
    # The compute constructs the run executed (OpenACC profiling, profile/regions.py); None:
    # not counted (no run, not an OpenACC build).
    regions: RegionsRan | None = None
    # solution_output came from the course's references (a students' copy): solution_problem
    # is then why there is none for these arguments.
    from_reference: bool = False
    target: str | None = None  # where the build runs its regions (Toolchain.target), when known
    # The source as the student knows it: its name, the line its text starts on (a cell's
    # second), and the name the build gave its file (renamed in what the checks show).
    source_name: str = ""
    first_line: int = 1
    temporary: str = ""
    host: HostComparison | None = None  # agrees_with_host: None when not compared
    # The student's own files the source includes (Source.headers): (name beside it, text).
    headers: tuple[tuple[str, str], ...] = ()
    # The solution's timed figures for the same arguments, each over the runs that measured it
    # ("seconds": its run's time, "gpu_busy": its trace's share), for the checks judged
    # relative to it (checks/ratio.py); a figure it lacks: unknown.
    solution_timed: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)

    @property
    def code(self) -> str:
        """What the compiler read: comments and disabled blocks removed. Without the build's
        preprocessed text (Fortran, whose `include` no preprocessor expands; another family),
        the source and then her headers: a directive she wrote in one is hers."""
        if self.compiled_text is not None:
            return self.compiled_text
        return "\n".join(code_text(text, self.language)
                         for text in (self.source_text, *(text for _, text in self.headers)))


def parse_number(text: str) -> float | None:
    try:
        return float(text.replace("D", "E").replace("d", "e"))
    except ValueError:
        return None


def close_enough(got: float, expected: float, abs_tol: float, rel_tol: float) -> bool:
    return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)


def number_text(x: float) -> str:
    return f"{x:.10g}"


def tolerance_text(spec: CheckSpec) -> str:
    parts = []
    if spec.abs_tol:
        parts.append(f"±{number_text(spec.abs_tol)}")
    if spec.rel_tol:
        parts.append(f"rel {number_text(spec.rel_tol)}")
    return f" ({', '.join(parts)})" if parts else ""


# An excerpt of the output: the lines around what a check read, or the last ones.
EXCERPT_CONTEXT = 2
EXCERPT_TAIL = 6
EXCERPT_WIDTH = 160


def output_excerpt(ev: Evidence, output: str, at: int | None) -> str:
    """The output's lines around line `at` (0-based; marked with >), or its last lines when at
    is None; numbered as the output's lines, the build's temporary names renamed."""
    lines = output.splitlines()
    if not lines:
        return ""
    if at is None or at >= len(lines):
        first, last, at = max(0, len(lines) - EXCERPT_TAIL), len(lines), None
    else:
        first, last = max(0, at - EXCERPT_CONTEXT), min(len(lines), at + EXCERPT_CONTEXT + 1)
    width = len(str(last))
    shown = []
    for i in range(first, last):
        text = lines[i] if len(lines[i]) <= EXCERPT_WIDTH else lines[i][:EXCERPT_WIDTH] + "…"
        shown.append(f"{'>' if i == at else ' '} {i + 1:>{width}} | {text}")
    excerpt = "\n".join(shown)
    if ev.temporary and ev.source_name:
        excerpt = rename_temporary(excerpt, ev.temporary, ev.source_name)
    return excerpt


def how_it_ended(p: ProcResult) -> str:
    """How the program ended, as a sentence around ProcResult.describe's words: 'the program
    was killed by SIGSEGV', 'the program ended with exit code 3'."""
    if p.start_error is not None:
        return f"the program could not be started ({p.start_error})"
    if p.timed_out and not p.interrupted:
        return "the program did not end in time (it timed out)"
    if p.interrupted or p.limit is not None or p.signal_name is not None:
        return f"the program was {p.describe()}"
    return f"the program ended with {p.describe()}"



def quoted(line: str, width: int = 60) -> str:
    text = line.strip()
    return f"'{text if len(text) <= width else text[:width] + '…'}'"



def numbers_printed(pattern: str, text: str) -> list[str]:
    return regex.findall(pattern, text)


def student_code(ev: Evidence) -> str:
    """The code numbered as the student reads it (a cell's code starts on its line 2), as the
    regions' lines are: the build numbers them so."""
    return "\n" * (ev.first_line - 1) + code_text(ev.source_text, ev.language)


@dataclass(frozen=True)
class CodeFile:
    """One file of the student's code as the checks read it: the source, or a header of hers."""

    name: str  # "": the source itself; a header by its name beside the source ("impl.h")
    code: str  # comments blanked, lines kept: numbered as she reads the file

    def at(self, line: int) -> str:
        """A line of it in words: "line 12" in the source, "impl.h, line 4" in a header."""
        return f"{self.name}, line {line}" if self.name else f"line {line}"

    @property
    def placed(self) -> bool:
        """Whether its lines are the source's, which the annotated listing shows (a check's
        line in a header would land on the source's line of that number)."""
        return not self.name


def student_files(ev: Evidence) -> list[CodeFile]:
    """The source, then her headers in the order the source includes them: a folder that puts
    its loops in impl.h is judged as the same code in one file (issue 44.6)."""
    return [CodeFile("", student_code(ev)),
            *(CodeFile(name, code_text(text, ev.language)) for name, text in ev.headers)]


def file_of(ev: Evidence, path: str) -> CodeFile:
    """The file of hers a compiler or runtime names by `path`: the header whose name ends it
    (a runtime's whole path, "/box/src/inc/impl.h"), else one whose name ends with it (gcc's
    line tables, read by profile/elflines.py, give "impl.h" alone), the longest match first;
    else the source (the name the build gave it, or none)."""
    files = student_files(ev)
    named = posixpath.normpath(path) if path else ""
    best, score = files[0], 0
    for file in files[1:] if named else ():
        name = posixpath.normpath(file.name)
        # A header that the whole path names beats one that only shares its last parts.
        found = 2 * len(name) + 1 if named == name or named.endswith("/" + name) else \
            2 * len(named) if name.endswith("/" + named) else 0
        if found > score:
            best, score = file, found
    return best


def human_bytes(n: float) -> str:
    """1073741904 -> '1.07 GB': short enough for the verdict table."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"
