"""The ladder of near-misses an exercise's marks must order (STYLE.md 22): made from its own
solution and start file, graded as a class is (`idrrun course check --ladder`), and judged
against a teacher's order and bounds. Pure: the texts and the judgement; course.py grades.

    rungs(exercise, language)        -> (Rung, ...): every near-miss, or why it cannot be made
    judge(marks, on_gpu)             -> [finding]: where the marks break the order or a bound

A teacher's order, best first (examples/README.md, "The ladder"):

    solution   the published solution
    slow       the solution, correct but slow: an `update self` of an array the device holds
               before a compute construct in a loop (moved at every iteration), else its hot
               construct made `serial` (one thread of the device)
    half       one hot loop left on the host: a compute construct's directive removed, the
               arrays it used brought to the host and back around it (the result stays right)
    wrong      the whole port with a wrong result: a numeric constant of the computed part (a
               compute construct's body, the hot statement first) changed, not what is printed
    trivial    the serial program with one compute region that does no real work
    start      the start file

and, apart: `comment`, the solution with every directive turned into a comment (a serial
program that only looks ported). Each rung is made by small rules of the text (directives,
their clauses, the lines their constructs hold: checks/loops.py); what a rule cannot find (a
solution with one compute construct has no half port) is said, not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from pathlib import Path

from ..checks import loops, registry
from ..checks.directives import code_text
from ..checks.score import points
from ..checks.specs import Exercise
from ..files import write_atomic
from ..model import CheckResult, FailureKind
from ..request import source as source_mod
from .directive_text import Construct, Directive, clause_items, constructs, directives, is_data, sentinel
from .discover import Submission
from .rows import GradeRow

def _record(kind: str) -> registry.Kind:
    """A check's kind record (specs accept registered kinds only)."""
    found = registry.get(kind)
    assert found is not None, kind
    return found


# The rungs in the teacher's order, best first; `comment` is held to its bound only.
ORDER = ("solution", "slow", "half", "wrong", "trivial", "start")
RUNGS = (*ORDER, "comment")
# The most each rung may earn, as a share of what the solution earns here.
BOUNDS: Mapping[str, float] = {"half": 0.70, "wrong": 0.70, "trivial": 0.25, "comment": 0.10}
# What each rung is, as the findings say it.
WHAT: Mapping[str, str] = {
    "solution": "the solution",
    "slow": "the solution made slow (correct)",
    "half": "a half port (one hot loop on the host, the result right)",
    "wrong": "the whole port with a wrong result",
    "trivial": "a compute region with no real work",
    "start": "the start file",
    "comment": "the directives only in comments",
}
# Where nothing sees slowness, the slow rung may earn what the solution does: on a host (no
# GPU: no speed), and on a GPU where the exercise has no speed check (the ladder says so).
TIES_UNSEEN = frozenset({("solution", "slow")})
UNSEEN_SPEED = ("the slow rung earns what the solution does: the exercise has no speed check, "
                "nothing of its marks sees the time a run takes on the GPU")


@dataclass(frozen=True)
class Rung:
    """One near-miss: its source, and what was changed (or why it could not be made)."""

    name: str
    text: str | None
    how: str  # what was changed, in words; why not, when text is None

    @property
    def made(self) -> bool:
        return self.text is not None


def _hot_lines(text: str, language: str, exercise: Exercise) -> list[int]:
    """The lines of the statements the exercise's loop_on_device checks name, in spec order."""
    code = code_text(text, language)
    out = []
    for check in exercise.checks:
        if _record(check.kind).names_the_hot_loop and check.pattern is not None:
            line = loops.statement_line(code, check.pattern)
            if line is not None:
                out.append(line)
    return out


def _holding(cs: Sequence[Construct], line: int) -> Construct | None:
    return next((c for c in cs if c.directive.first <= line <= c.end), None)


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _directive_line(language: str, model: str, words: str, like: str) -> str:
    """A directive line of the model, indented as the line `like`."""
    opening = f"!${sentinel(model)}" if language == "fortran" else f"#pragma {sentinel(model)}"
    return f"{_indent(like)}{opening} {words}"


# ---------------------------------------------------------------------------------------------
# The rungs


def comment(text: str, language: str, model: str) -> Rung:
    """Every directive of the model written as a comment: a serial program that looks ported."""
    lines = text.split("\n")
    found = directives(text, language, model)
    if not found:
        return Rung("comment", None, "the solution has no directive")
    for d in found:
        for n in range(d.first, d.last + 1):
            line = lines[n - 1]
            if language == "fortran":
                lines[n - 1] = re.sub(r"!\$", "! $", line, count=1)
            else:
                body = line.rstrip().removesuffix("\\").rstrip()
                lines[n - 1] = f"{_indent(line)}// {body.lstrip()}"
    return Rung("comment", "\n".join(lines), f"{len(found)} directives written as comments")


def serial(text: str, language: str, model: str) -> str:
    """The text without any directive of the model."""
    lines = text.split("\n")
    gone = {n for d in directives(text, language, model) for n in range(d.first, d.last + 1)}
    return "\n".join(line for n, line in enumerate(lines, 1) if n not in gone)


_C_MAIN = re.compile(r"\bint\s+main\s*\(")
_F_PROGRAM = re.compile(r"^\s*program\s+\w+", re.IGNORECASE | re.MULTILINE)
_F_PROGRAM_END = re.compile(r"^\s*(contains\b|end\s+program\b|end\s*$)", re.IGNORECASE)
_IDLE = {
    ("c", "openacc"): ("{   /* a compute region with no real work */", "    int idle_ = 0;",
                       "    #pragma acc parallel loop copy(idle_)",
                       "    for (int i_ = 0; i_ < 1; i_++)", "        idle_ = 1;", "}"),
    ("c", "openmp"): ("{   /* a target region with no real work */", "    int idle_ = 0;",
                      "    #pragma omp target map(tofrom: idle_)", "    idle_ = 1;", "}"),
    ("fortran", "openacc"): ("block  ! a compute region with no real work",
                             "  integer :: idle_i, idle_v", "  idle_v = 0",
                             "  !$acc parallel loop copy(idle_v)", "  do idle_i = 1, 1",
                             "    idle_v = 1", "  end do", "end block"),
    ("fortran", "openmp"): ("block  ! a target region with no real work",
                            "  integer :: idle_v", "  idle_v = 0",
                            "  !$omp target map(tofrom: idle_v)", "  idle_v = 1",
                            "  !$omp end target", "end block"),
}


def _main_place(lines: Sequence[str], language: str) -> tuple[int, str] | None:
    """Where the trivial region goes (the index of the line it goes before) and its indent: at
    the top of C's main, at the end of a Fortran main program's statements."""
    if language == "fortran":
        text = "\n".join(lines)
        start = _F_PROGRAM.search(text)
        if start is None:
            return None
        first = text.count("\n", 0, start.start()) + 1
        for i in range(first, len(lines)):
            if _F_PROGRAM_END.match(lines[i]):
                return i, "  "
        return None
    for i, line in enumerate(lines):
        if _C_MAIN.search(line):
            for j in range(i, len(lines)):
                if "{" in lines[j]:
                    return j + 1, "    "
    return None


def trivial(text: str, language: str, model: str) -> Rung:
    """The serial program (every directive removed) with one compute region that does no real
    work: it runs, and the work stays on the host."""
    lines = serial(text, language, model).split("\n")
    place = _main_place(lines, language)
    idle = _IDLE.get((language, model))
    if place is None or idle is None:
        return Rung("trivial", None, "no main program found to put a region in")
    at, indent = place
    lines[at:at] = [indent + line for line in idle]
    return Rung("trivial", "\n".join(lines), f"every directive removed, a region with no work "
                                              f"at line {at + 1}")


def _with_lines(text: str, insert: Mapping[int, Sequence[str]], drop: frozenset[int] = frozenset(),
                replace: Mapping[int, str] | None = None) -> str:
    """The text with lines inserted before the given lines (from 1; past the end: appended),
    some dropped, some replaced."""
    out: list[str] = []
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        out += insert.get(n, ())
        if n not in drop:
            out.append((replace or {}).get(n, line))
    out += insert.get(len(lines) + 1, ())
    return "\n".join(out)


def _update(language: str, model: str, way: str, items: Sequence[str], like: str) -> str:
    if model == "openacc":
        return _directive_line(language, model, f"update {way}({', '.join(items)})", like)
    omp_way = "from" if way == "self" else "to"
    return _directive_line(language, model, f"target update {omp_way}({', '.join(items)})", like)


def _on_device(c: Construct, model: str) -> list[str]:
    """What a construct expects on the device already: its present items (OpenACC), its
    mapped ones inside a data region (OpenMP)."""
    return clause_items(c.directive.words, "present" if model == "openacc" else "map")


def _in_loop(text: str, language: str, line: int) -> bool:
    return loops.enclosing_loop(code_text(text, language), line, language) is not None


def slow(text: str, language: str, model: str, exercise: Exercise) -> Rung:
    """The solution, correct but slow: an array the device holds copied back to the host before
    a hot compute construct that runs at every iteration (in a loop, or in a function called in
    one); else its hot construct made serial."""
    cs = constructs(text, language, model)
    hot = {h.directive.first for line in _hot_lines(text, language, exercise)
           if (h := _holding(cs, line)) is not None}
    held = [c for c in cs if _on_device(c, model) and not c.directive.says(r"\basync\b")]
    held.sort(key=lambda c: not _in_loop(text, language, c.directive.first))
    if hot and model == "openacc":
        # Only where the copy costs. A construct in a loop that is not hot may run at a few
        # iterations only (life_swap's population, at its pictures: the copy was there
        # already), and a copy before a construct that runs once costs next to nothing
        # (async_matmul's product: 1.0x on the H200): then the hot construct made serial.
        # Without a hot loop named (no loop_on_device check), or where nothing can be made
        # serial (OpenMP): the first such construct, one in a loop first.
        code = code_text(text, language)

        def looped(c: Construct) -> bool:
            return _in_loop(text, language, c.directive.first) or \
                loops.called_in_loop(code, c.directive.first, language)

        # Where the hot construct runs once (compute_scan's block sums, after the time loop:
        # made serial it earned every point of the GPU-timed speed check on the H200), the
        # copy goes before a construct of the loop itself: the slow port its loop makes.
        hot_looped = any(looped(c) for c in cs if c.directive.first in hot)
        held = [c for c in held if looped(c) and (c.directive.first in hot or not hot_looped)]
    lines = text.split("\n")
    if held:
        c = held[0]
        item = _on_device(c, model)[0]
        update = _update(language, model, "self", [item], lines[c.directive.first - 1])
        where = "in its loop" if _in_loop(text, language, c.directive.first) else "at each call"
        return Rung("slow", _with_lines(text, {c.directive.first: [update]}),
                    f"{update.strip()} before the construct at line {c.directive.first}, {where}")
    return _serial_construct(text, language, model, cs, exercise)


_SIZES = re.compile(r"\s*\b(num_gangs|num_workers|vector_length)\s*\([^)]*\)", re.IGNORECASE)


def _serial_construct(text: str, language: str, model: str, cs: Sequence[Construct],
                      exercise: Exercise) -> Rung:
    if model != "openacc" or not cs:
        return Rung("slow", None, "no construct to make slow")
    hot = [h for line in _hot_lines(text, language, exercise) if (h := _holding(cs, line)) is not None]
    c = (hot or list(cs))[0]
    lines = text.split("\n")
    replace = {}
    for n in range(c.directive.first, c.directive.last + 1):
        line = re.sub(r"\b(parallel|kernels)\b", "serial", lines[n - 1], count=1, flags=re.IGNORECASE) \
            if n == c.directive.first else lines[n - 1]
        replace[n] = _SIZES.sub("", line)
    if language == "fortran" and c.end != c.directive.last:
        replace[c.end] = re.sub(r"\b(parallel|kernels)\b", "serial", lines[c.end - 1], flags=re.IGNORECASE)
    return Rung("slow", _with_lines(text, {}, replace=replace),
                f"the construct at line {c.directive.first} made serial (one device thread)")


def _inner(found: Sequence[Directive], c: Construct) -> set[int]:
    """The lines of the directives a construct holds, its own and its `end` included."""
    return {n for d in found if c.directive.first <= d.first <= c.end for n in range(d.first, d.last + 1)}


def _half_choice(text: str, language: str, model: str, exercise: Exercise) -> Construct | str:
    """The construct a half port leaves on the host: with several hot loops (loop_on_device),
    the last one's; else the first construct that holds none; never one that works on device
    pointers or on async queues (the host could not run it), nor a serial one."""
    cs = [c for c in constructs(text, language, model)
          if not c.directive.says(r"\b(deviceptr|async|serial)\b")]
    if len(constructs(text, language, model)) < 2:
        return "the solution has one compute construct: no half port to make"
    hot = [h for line in _hot_lines(text, language, exercise) if (h := _holding(cs, line)) is not None]
    if len({h.directive.first for h in hot}) >= 2:
        return hot[-1]
    cold = [c for c in cs if c not in hot]
    if cold:
        return cold[0]
    return "no compute construct the host could run instead"


def half(text: str, language: str, model: str, exercise: Exercise) -> Rung:
    """One hot loop left on the host: a compute construct's directives removed; what it
    expected on the device copied to the host before it and back after it, so that the result
    stays the solution's (a careful student's half port)."""
    chosen = _half_choice(text, language, model, exercise)
    if isinstance(chosen, str):
        return Rung("half", None, chosen)
    lines = text.split("\n")
    found = directives(text, language, model)
    # OpenACC's present items are on the device whatever put them there (a data region, a
    # declare); an OpenMP map moves data by itself unless a data region holds it already.
    data = model == "openacc" or any(is_data(d, model) for d in found)
    items = _on_device(chosen, model) if data else []
    like = lines[chosen.directive.first - 1]
    insert = {chosen.directive.first: [_update(language, model, "self", items, like)],
              chosen.end + 1: [_update(language, model, "device", items, like)]} if items else {}
    how = f"the construct at line {chosen.directive.first} removed (lines " \
          f"{chosen.directive.first}-{chosen.end} on the host)" + \
          (f", {', '.join(items)} brought to the host and back" if items else "")
    return Rung("half", _with_lines(text, insert, frozenset(_inner(found, chosen))), how)


# Numeric constants: a real one (C: 2.0, .5, 1e-3, 2.0f; Fortran: 0.25_dp, 1.0d0), else a whole one.
_REAL = re.compile(r"(?<![\w.])(\d*\.\d+|\d+\.\d*|\d+(?=[eEdD][-+]?\d))([eEdD][-+]?\d+)?(_\w+|[fFlL])?(?![\w.])")
_WHOLE = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
# Lines whose constants decide a path, not a value: loop headers, conditions.
_NOT_A_VALUE = re.compile(r"^\s*(for|do|while|if|else|}|end|case|select)\b", re.IGNORECASE)
# An assignment whose value a wrong result may double: C's `x op= value;`, Fortran's `x = value`.
_C_ASSIGN = re.compile(r"^(?P<lhs>\s*[^=!<>;]*?[^=!<>+\-*/])\s*(?P<op>[-+*/]?=)(?!=)\s*(?P<rhs>[^;]+);\s*$")
_F_ASSIGN = re.compile(r"^(?P<lhs>\s*[A-Za-z_][\w%]*\s*(\([^=]*\))?)\s*=(?!=)\s*(?P<rhs>.+?)\s*$")


def _bumped(literal: str) -> str:
    """A constant with its whole part one more: 4.0 -> 5.0, .5 -> 1.5, 0.25_dp -> 1.25_dp."""
    m = re.match(r"\d*", literal)
    whole = m.group(0) if m is not None else ""
    return str(int(whole or "0") + 1) + literal[len(whole):]


def _bracketed(line: str, at: int, language: str) -> bool:
    """Whether offset `at` is inside an index: C's [ ], Fortran's ( )."""
    opening, closing = ("(", ")") if language == "fortran" else ("[", "]")
    return line.count(opening, 0, at) > line.count(closing, 0, at)


def _changes(line: str, language: str) -> Iterator[tuple[str, str]]:
    """The changes of one line a wrong result may make, best first, each (new line, what it
    did): a real constant bumped, a whole one outside indices, else the assigned value doubled."""
    if _NOT_A_VALUE.match(line):
        return
    for pattern in (_REAL, _WHOLE):
        for m in pattern.finditer(line):
            if pattern is _WHOLE and _bracketed(line, m.start(), language):
                continue
            new = _bumped(m.group(0))
            yield line[:m.start()] + new + line[m.end():], f"{m.group(0)} changed to {new}"
    yield from _doubled(line, language)


def _doubled(line: str, language: str) -> Iterator[tuple[str, str]]:
    code = line.split("!")[0] if language == "fortran" else line
    if code.rstrip().endswith(("&", "\\", ",")):
        return
    if language == "fortran":
        m = _F_ASSIGN.match(code)
        if m is None or code.strip().lower().startswith(("call ", "print", "write", "read")):
            return
        lhs, rhs = m["lhs"].rstrip(), m["rhs"]
        kept = lhs.strip() + " +"
        if rhs.replace(" ", "").startswith(kept.replace(" ", "")):  # x = x + value: the value doubled
            value = rhs.split("+", 1)[1].strip()
            yield f"{lhs} = {lhs.strip()} + 2 * ({value})", f"{value} doubled"
        else:
            yield f"{lhs} = 2 * ({rhs})", f"{rhs.strip()} doubled"
        return
    m = _C_ASSIGN.match(code)
    if m is not None:
        yield f"{m['lhs']} {m['op']} 2 * ({m['rhs'].strip()});", f"{m['rhs'].strip()} doubled"


def _same_statements(before: str, after: str, language: str, exercise: Exercise) -> bool:
    """The spec's loop_on_device statements are found on the same lines after the change."""
    return _hot_lines(before, language, exercise) == _hot_lines(after, language, exercise)


def wrong(text: str, language: str, model: str, exercise: Exercise) -> Rung:
    """The whole port with a wrong result: one numeric constant of the computed part changed
    (a compute construct's body; the hot statement's line first), never what is printed."""
    cs = constructs(text, language, model)
    code = code_text(text, language).split("\n")
    raw = text.split("\n")
    found = directives(text, language, model)
    directive_lines = {n for d in found for n in range(d.first, d.last + 1)}
    body = [n for c in cs for n in range(c.directive.last + 1, c.end + 1) if n not in directive_lines]
    order = list(dict.fromkeys([*[h for h in _hot_lines(text, language, exercise) if h in body], *body]))
    candidates = [(n, new, how) for n in order if code[n - 1] == raw[n - 1]
                  for new, how in _changes(raw[n - 1], language)]
    candidates.sort(key=lambda c: 0 if "changed to" in c[2] and "." in c[2] else
                    1 if "changed to" in c[2] else 2)
    for n, new, how in candidates:
        changed = _with_lines(text, {}, replace={n: new})
        if _same_statements(text, changed, language, exercise):
            return Rung("wrong", changed, f"line {n}: {how}")
    return Rung("wrong", None, "no numeric constant nor value in the compute constructs' bodies")


def rungs(exercise: Exercise, language: str) -> tuple[Rung, ...]:
    """Every rung of the exercise's ladder in one language (RUNGS' order): the solution and
    the start file as they are, the others made from the solution."""
    pair = exercise.sources[language]
    if pair.solution is None:
        return ()
    solution = pair.solution.read_text(encoding="utf-8")
    start = pair.exercise.read_text(encoding="utf-8")
    model = exercise.model
    made = {
        "solution": Rung("solution", solution, "the solution as published"),
        "slow": slow(solution, language, model, exercise),
        "half": half(solution, language, model, exercise),
        "wrong": wrong(solution, language, model, exercise),
        "trivial": trivial(solution, language, model),
        "start": Rung("start", start, "the start file as published"),
        "comment": comment(solution, language, model),
    }
    return tuple(made[name] for name in RUNGS)


# ---------------------------------------------------------------------------------------------
# Grading a ladder, and judging its marks


def submissions(exercise: Exercise, language: str, folder: Path) -> list[tuple[Rung, Submission | None]]:
    """Each rung that is neither the solution nor the start file (course check grades those
    already) as a submission: its text written into `folder` (the grader's own), the student
    named EXERCISE/LANGUAGE/RUNG."""
    suffix = ".f90" if language == "fortran" else ".c"
    out: list[tuple[Rung, Submission | None]] = []
    for rung in rungs(exercise, language):
        if rung.name in ("solution", "start"):
            continue
        if rung.text is None:
            out.append((rung, None))
            continue
        path = folder / f"{exercise.name}_{language}_{rung.name}{suffix}"
        write_atomic(path, rung.text)
        src = source_mod.from_file(path, language, path.name)  # type: ignore[arg-type]
        out.append((rung, Submission(f"{exercise.name}/{language}/{rung.name}", path, src)))
    return out


@dataclass(frozen=True)
class Graded:
    """A rung and its row (None: not made, Rung.how says why)."""

    rung: Rung
    row: GradeRow | None

    @property
    def share(self) -> float | None:
        """What it earns of the points evaluated here; None: not scored."""
        s = self.row.score if self.row is not None else None
        if s is None or s.evaluated <= 0:
            return None
        return s.earned / s.evaluated


def result_check(exercise: Exercise, check: CheckResult) -> bool:
    """A check of the result of the work asked: what the program prints or writes (its exit
    aside), on the main run."""
    spec = exercise.check_at(check.check)
    kind = registry.get(spec.kind) if spec is not None else None
    return kind is not None and kind.reads == "output" and kind.name != "exit_ok" and \
        check.hidden == 0


def _results(exercise: Exercise, row: GradeRow) -> list[CheckResult]:
    return [c for c in row.checks if result_check(exercise, c)]


def _ended(exercise: Exercise, row: GradeRow) -> bool:
    """Its main run ended normally (its exit_ok passed, where the spec has one)."""
    ends = [c for c in row.checks if c.hidden == 0 and (spec := exercise.check_at(c.check))
            is not None and _record(spec.kind).judges_the_end]
    return all(c.status == "pass" for c in ends) and row.failure not in _NOT_RUN


# What a wrong result is not: a program that did not build or run to its end.
_NOT_RUN = (FailureKind.COMPILE_ERROR, FailureKind.COMPILE_TIMEOUT, FailureKind.NOT_STARTED,
            FailureKind.TIMEOUT, FailureKind.LIMIT, FailureKind.SIGNAL, FailureKind.EXIT_STATUS)


def unlike(exercise: Exercise, graded: Graded) -> str:
    """Why a rung is not what it claims to be ("" when it is): a rung that should be right
    whose result is wrong, a wrong one whose result is right, one that did not run. A rung
    that is not what it claims is not judged (the generator missed, not the spec)."""
    row = graded.row
    if row is None or row.status == "error":
        return row.error if row is not None else graded.rung.how
    if row.score is None:
        return "not scored"
    results = _results(exercise, row)
    wrong = [c.name for c in results if c.status == "fail"]
    if graded.rung.name == "wrong":
        if not wrong:
            return f"its result is right ({graded.rung.how} changed nothing the checks read)"
        return "" if _ended(exercise, row) else f"it did not end normally ({row.failure_what})"
    if graded.rung.name != "start" and wrong:
        return f"its result is not right ({', '.join(wrong)}): {graded.rung.how}"
    return ""


def not_slow(exercise: Exercise, graded: Graded) -> str:
    """Why the slow rung is not slow ("" when it is, or when nothing here says): on a GPU,
    every check that scores its time earned all its points, as the solution's (the rung's
    defect costs less than the speed scale's first step at the course's size: compute_scan's
    block sums made serial, which run once, earned every point of it on the H200). Its
    marks are then right, and the rung says nothing of the order: not judged, with figures."""
    row = graded.row
    if graded.rung.name != "slow" or row is None or row.score is None:
        return ""
    timed = [c for c in row.checks if c.hidden == 0 and (spec := exercise.check_at(c.check))
             is not None and _record(spec.kind).scores_time]
    if not timed or any(c.status != "pass" or (c.credit is not None and c.credit < 1 - _EPSILON)
                        for c in timed):
        return ""
    figures = "; ".join(f"{c.name} {c.got}" for c in timed)
    return f"it is not slow here ({figures}: every point of its speed): {graded.rung.how}"


@dataclass(frozen=True)
class Judged:
    """What the ladder's marks say: where they break the order or a bound (findings), and
    the rungs not judged, with why (notes)."""

    findings: tuple[str, ...]
    notes: tuple[str, ...]


_EPSILON = 1e-9


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"


def _earned(graded: Graded) -> str:
    s = graded.row.score if graded.row is not None else None
    if s is None:
        return ""
    by_check: dict[int, list[str | float]] = {}
    for i in s.items:
        if i.outcome == "earned":
            entry = by_check.setdefault(i.check, [i.label, 0.0])
            entry[1] = float(entry[1]) + i.worth
    earned = [f"{label} {points(float(worth))}" for label, worth in by_check.values()]
    return f"{points(s.earned)} of {points(s.evaluated)}: {', '.join(earned) or 'nothing'}"


def _order(exercise: Exercise, judged: Sequence[Graded], on_gpu: bool) -> tuple[list[str], list[str]]:
    """(findings, notes) of the order: each judged rung below the one above it; the slow rung
    may tie the solution where nothing sees speed (a note on a GPU)."""
    sees_speed = on_gpu and any(_record(c.kind).scores_time for c in exercise.checks)
    findings: list[str] = []
    notes: list[str] = []
    for upper, lower in zip(judged, judged[1:]):
        assert upper.share is not None and lower.share is not None
        tie = not sees_speed and (upper.rung.name, lower.rung.name) in TIES_UNSEEN
        level = lower.share >= upper.share - _EPSILON
        if tie and on_gpu and level:
            notes.append(UNSEEN_SPEED)
        if lower.share > upper.share + _EPSILON or (level and not tie):
            findings.append(f"the order breaks: {WHAT[lower.rung.name]} earns "
                            f"{_percent(lower.share)}, {WHAT[upper.rung.name]} "
                            f"{_percent(upper.share)} ({lower.rung.how}; it earns {_earned(lower)})")
    return findings, notes


def _bounds(exercise: Exercise, graded: Sequence[Graded]) -> list[str]:
    """A rung that earns more than its bound (BOUNDS)."""
    out = []
    for g in graded:
        bound = BOUNDS.get(g.rung.name)
        if bound is not None and g.share is not None and not unlike(exercise, g) and \
                g.share > bound + _EPSILON:
            out.append(f"{WHAT[g.rung.name]} earns {_percent(g.share)}, more than "
                       f"{_percent(bound)} ({g.rung.how}; it earns {_earned(g)})")
    return out


def judge(exercise: Exercise, graded: Sequence[Graded], on_gpu: bool) -> Judged:
    """The marks of one exercise's ladder in one language against the teacher's order (each
    judged rung earns less than the one above it; the slow rung may earn what the solution
    does where nothing sees speed: on a host, or an exercise without a speed check, said in a
    note) and the bounds (BOUNDS, shares of the points evaluated here)."""
    by_name = {g.rung.name: g for g in graded}

    def why_not(g: Graded) -> str:
        return unlike(exercise, g) or (not_slow(exercise, g) if on_gpu else "")

    notes = [f"{WHAT[g.rung.name]}: not judged: {why}" for g in graded
             if g.rung.name != "solution" and (why := why_not(g))]
    judged = [by_name[name] for name in ORDER if name in by_name and by_name[name].share is not None
              and not why_not(by_name[name])]
    findings, more = _order(exercise, judged, on_gpu)
    return Judged(tuple(findings + _bounds(exercise, graded)), tuple(notes + more))
