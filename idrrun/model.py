"""The values that flow through idrrun's pipeline, as frozen dataclasses (stdlib only).

    RunRequest -> Toolchain -> BuildResult -> RunResult -> Verdict

Each stage is a plain function of the previous stage's value (see pipeline.py). Expected
failures of a course (a compile error, a crash, a timeout, a wrong answer) are data here, not
exceptions.
"""

from __future__ import annotations

import signal as _signal
import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


Language = Literal["c", "c++", "fortran", "cuda"]
LANGUAGES: tuple[Language, ...] = ("c", "c++", "fortran", "cuda")
# A compiler family's name, as its module registers it (toolchains/): "gcc", "nvhpc", "pgi", ...
FamilyName = str
# Where the OpenACC regions of a build will execute.
Target = Literal["gpu", "host", "none"]


@dataclass(frozen=True)
class LauncherConfig:
    kind: str = "none"  # none: run the program directly; -m N then uses mpirun
    command: str = ""
    tasks: str = ""  # flag for the number of tasks; a flag ending in "=" is glued to its value
    threads: str = ""
    gpus: str = ""
    nodes: str = ""  # flag for the number of nodes (srun: --nodes=)
    options: tuple[str, ...] = ()
    # Compile through the launcher too, as a one-task step (srun only); None: the front end
    # decides (`idrrun grade --launcher srun` does, a notebook compiles where it runs).
    builds: bool | None = None


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).absolute() / "idrrun"  # never read as an option on a tool's line


@dataclass(frozen=True)
class Settings:
    """What the config files and the environment say (request/config.py reads them).

    `values` holds the settings that back a flag (timeout, limits.memory, family, ...), keyed by
    the flag's Options field and already parsed by the flag's own parser; a key is absent when
    no layer set it, so that request/resolve.py can tell "not set" from a value.
    """

    values: Mapping[str, object] = field(default_factory=dict)
    cache_dir: Path = field(default_factory=default_cache_dir)
    examples_dir: Path | None = None
    offload: str = "auto"  # auto | gpu | host: whether a family that may build for the host does
    # family -> key -> value; values are commands (str) or, for "flags", tuple[str, ...]
    compilers: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    profiler: tuple[str, ...] = ()
    # [grading] seed: the instructor's seed of the hidden argument sets drawn when grading
    # (checks/draw.py); None: the one kept in the grader's cache (grading/report.py grading_seed).
    grading_seed: str | None = None
    files: tuple[str, ...] = ()  # the config files that were read, in order

    @property
    def family(self) -> str | None:
        value = self.values.get("family")
        return value if isinstance(value, str) else None

    @property
    def language(self) -> Language | None:
        value = self.values.get("language")
        return value if isinstance(value, str) and value in LANGUAGES else None

    def compiler_command(self, family: str, key: str) -> str | None:
        value = self.compilers.get(family, {}).get(key)
        return value if isinstance(value, str) else None

    def extra_flags(self, family: str) -> tuple[str, ...]:
        value = self.compilers.get(family, {}).get("flags", ())
        return tuple(str(v) for v in value) if isinstance(value, (tuple, list)) else ()


@dataclass(frozen=True)
class Source:
    """The code to build, as the student wrote it."""

    text: str
    name: str  # what diagnostics show instead of a temporary path: "cell[3]" or the file's path
    language: Language
    language_guessed: bool
    # Line number, in the cell or file, of the first line of `text`: 2 for a cell (the magic
    # line is line 1), 1 for a file. The written source is padded so compiler lines match.
    first_line: int
    origin_dir: Path  # where `#include "x.h"` and Fortran `include` files are looked up
    suffix: str  # file suffix given to the compiler: ".c", ".f90", ...
    # The files of the student's own that the source includes from its folder, transitively:
    # (name beside the source, text), as read once with it (grading/discover.py). They are her
    # code as much as the source is: the checks look for her loops, regions and directives in
    # them too. () where none were read (a cell, a file run by hand: the source alone).
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RelativeTimeout:
    """`timeout = "20x solution, at least 5 s, at most 180 s"`: where the solution's time is
    known (grading, the course check, and a --check on a course that has the solution: it runs
    first, once per machine and arguments), a run may take `factor` times that, at least
    `at_least` seconds and never more than the exercise's timeout (the `at most`, else the
    default): a program already far slower than the solution is stopped early, and says so."""

    factor: float
    at_least: float = 0.0

    def limit(self, solution_seconds: float, cap: float) -> float:
        """The time a run is given against a solution that took `solution_seconds`."""
        return min(cap, max(self.at_least, self.factor * solution_seconds))

    def __str__(self) -> str:
        return f"{self.factor:g}x the solution's time, at least {self.at_least:g} s"


@dataclass(frozen=True)
class RunRequest:
    """One `%%idrrun` cell, `%idrrunfile` or `idrrun run`, with every option resolved.

    The defaults here are THE defaults: request/resolve.py fills a field from the line, the
    exercise or the settings, in that order, and leaves this default when none of them sets it.
    The names are those of the option spec (request/options.py), so that a new flag needs its
    declaration there, its field here and the stage that uses it.
    """

    source: Source
    workdir: Path
    acc: bool = False
    accopts: tuple[str, ...] = ()
    compiler_options: tuple[str, ...] = ()
    program_args: tuple[str, ...] = ()
    openmp: bool = False
    threads: int | None = None
    mpi_ranks: int | None = None
    gpus: int | None = None
    nodes: int | None = None
    get_files: tuple[str, ...] = ()
    show_time: bool = True
    profile: str | None = None  # "auto", "nsys", "builtin": which profiler; None: none
    # False: the profile is collected for the checks only (a --check whose checks read the GPU
    # trace, on a line without --profile: request/resolve.py's checks_trace) and not shown.
    show_profile: bool = True
    execute: bool = True  # False: build only (-n); an object build (--object) never runs
    object_only: bool = False
    keep: str | None = None
    timeout: float = 300.0
    # The exercise's limit relative to the solution's time (checking.limited applies it once
    # the solution's time here is known); None when the line gives --timeout: the student's
    # own limit lets the program run, whatever the solution's time.
    relative_timeout: RelativeTimeout | None = None
    compile_timeout: float = 120.0
    max_output: int = 1 << 20
    force: bool = False
    raise_on_failure: bool = True
    check: str | None = None
    limits: Limits = field(default_factory=lambda: Limits())
    # The compiler's own limits: an `#include "/dev/zero"` or a 1 GB static array stops here.
    compile_limits: Limits = field(default_factory=lambda: Limits(memory=4 << 30, tasks=256,
                                                                   file_size=512 << 20))
    sandbox: bool = False  # compile and run in a box (run/sandbox.py): always when grading
    # Its arguments are a hidden case's (grading): at the "uid" level, where every process's
    # command line is open to all, its run has no other box beside it (sandbox.alone).
    hidden_args: bool = False
    hide: tuple[Path, ...] = ()  # folders a box must not see (the exercise's, with its solutions)
    # Grading: the grader's own folder for this request (run/boundary.py). Each compile and each
    # run then gets a fresh folder in it, filled with a copy of `workdir`'s files, given to a
    # fresh uid when the grader is root; builds are kept in ROOM/builds, not in the shared
    # cache. None: compile in the cache, run in `workdir` as idrrun's own user.
    room: Path | None = None
    # Grading on a machine with GPUs: its lanes (run/lanes.py), which the run takes a GPU and
    # CPUs from; None: the run takes no lane. timed: the run's checks include a timed one
    # (specs.TIMED_KINDS): it waits for its GPU to be free of other graded runs and runs on
    # its lane's own CPUs.
    lanes: Lanes | None = None
    timed: bool = False
    # The exercise compares the GPU's output with the host's (agrees_with_host): the build must
    # be able to run its compute regions on the host too (the family's openacc() decides how).
    compare_host: bool = False
    # Run a GPU build with its compute regions on the host (the family's run_env says how).
    run_on_host: bool = False


@dataclass(frozen=True)
class Lanes:
    """A grading machine's GPU lanes (run/lanes.py), one per GPU: a timed run holds its lane's
    GPU alone and runs on the lane's own CPUs; every other graded process shares a GPU and
    keeps to `rest`. The lock files in `folder` make gradings of one user share the lanes."""

    gpus: tuple[str, ...]  # each lane's GPU, as its runs' CUDA_VISIBLE_DEVICES names it
    cores: tuple[tuple[int, ...], ...]  # each lane's own CPUs, for its timed runs
    rest: tuple[int, ...]  # the CPUs of every other graded process (compiles included)
    folder: Path  # the lanes' lock files


@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: str  # "9.0"
    driver: str

    @property
    def sm(self) -> int:
        major, _, minor = self.compute_capability.partition(".")
        try:
            return int(major) * 10 + int(minor or 0)
        except ValueError:
            return 0


@dataclass(frozen=True)
class CompilerInfo:
    command: str  # as configured: "gcc"
    path: str | None  # resolved on PATH, None when missing
    version: str  # first line of --version, "" when unknown


@dataclass(frozen=True)
class Limits:
    """Per-run limits; None means no limit. Defaults are what a teacher would pick.

    memory: none, so that the HPC programs of a course run in notebooks as they would in a job
    (`idrrun grade` sets its own cap: commands/grade.py). stack: 1 GiB, as generous as the
    `ulimit -s unlimited` of HPC job scripts for big automatic arrays, yet a runaway recursion
    still ends in a segfault instead of eating the machine's memory. glibc gives every thread
    (OpenMP's too) a stack of RLIMIT_STACK, reserved, not used: with "unlimited" it would fall
    back to its small built-in size."""

    memory: int | None = None
    tasks: int | None = 256
    file_size: int | None = 1 << 30
    stdin: Path | None = None
    stack: int | None = 1 << 30
    # The CPUs the program may run on (the guard's sched_setaffinity); (): wherever it is let.
    # A grading keeps its processes off the CPUs of the timed runs' lanes (run/lanes.py).
    cpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Cgroups:
    version: int  # 1 or 2
    memory_parent: Path | None
    pids_parent: Path | None


SandboxLevel = Literal["namespaces", "uid", "none"]


@dataclass(frozen=True)
class SandboxSupport:
    """How much a sandbox (run/sandbox.py) can wall off on this machine, probed once."""

    level: SandboxLevel
    bwrap: str | None
    root: bool
    why: str = ""  # why the level is not "namespaces"

    def describe(self) -> str:
        if self.level == "namespaces":
            own = "a fresh uid per run, " if self.root else ""
            return (f"sandbox: bubblewrap ({own}own mount, PID and network namespaces, system "
                    "folders read-only, nothing else visible)")
        if self.level == "uid":
            return f"sandbox: a fresh uid per run, private folders (no namespaces: {self.why})"
        return f"no sandbox: {self.why}"


@dataclass(frozen=True)
class Protections:
    guard: Path | None  # the built guard executable
    cgroups: Cgroups | None
    root: bool
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: the protections active on this machine."""
        active = ["wall-clock limit", "process-group kill", "output cap", "stdin closed"]
        if self.guard is not None:
            active += ["kernel-death cleanup", "/proc sweep of escaped processes", "file-size cap"]
        if self.cgroups is not None:
            kinds = [k for k, p in (("memory", self.cgroups.memory_parent),
                                    ("tasks", self.cgroups.pids_parent)) if p is not None]
            active.append(f"cgroup v{self.cgroups.version} ({', '.join(kinds)})")
        elif self.guard is not None:
            active.append("memory by RLIMIT_AS on host runs only")
            if not self.root:
                active.append("tasks by RLIMIT_NPROC")
        return "; ".join(active)


@dataclass(frozen=True)
class Probe:
    """What this machine offers, probed once per kernel (short timeouts, never raises)."""

    family: FamilyName
    compilers: tuple[CompilerInfo, ...]
    gpus: tuple[GpuInfo, ...]
    offload: bool  # the family's compilers can build GPU code here (gcc: nvptx offloading installed)
    # The GPU targets (sm_XY as XY) the family can build for here: None when it does not say,
    # () when none (gcc: this machine's ptxas accepts none of the targets GCC knows).
    offload_targets: tuple[int, ...] | None = None
    warnings: tuple[str, ...] = ()
    protections: Protections | None = None

    def compiler(self, command: str) -> CompilerInfo | None:
        for info in self.compilers:
            if info.command == command:
                return info
        return None


@dataclass(frozen=True)
class DoctorLine:
    """One line of `idrrun doctor`: a topic, its state and, when not OK, how to fix it."""

    topic: str
    status: str  # OK, missing, warning, info (doctor.py's constants)
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Toolchain:
    """How to compile this request: the compiler and every flag, decided from data."""

    family: FamilyName
    language: Language
    compiler: CompilerInfo
    flags: tuple[str, ...]  # before the source file
    link_flags: tuple[str, ...]  # after it
    target: Target
    notes: tuple[str, ...] = ()  # what the student should know of this request: ignored accopts
    # What the family says of this machine (host fallback, the GPU target it builds), the same
    # for every request here: a notebook says them once per kernel.
    machine_notes: tuple[str, ...] = ()
    offload: bool = False  # built with code for a GPU (target "host": built for one, none here)
    # What the header calls it: the family, or the compiler of a language that no family's
    # model covers (CUDA: nvcc, whichever family is in use).
    label: str = ""
    # Where the compilers of this build live (bin/..): the compiler's own and, for an MPI
    # wrapper, that of the compiler it runs. A graded compile may read there (its headers,
    # Fortran modules) and its box shows them.
    prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preprocessing:
    """How a build also leaves the source as its compiler read it (comments and disabled #if
    blocks gone: build.PREPROCESSED), for the source checks: flags that make the compile keep
    its preprocessor's output, and the file it then leaves beside its product. One
    preprocessor pass, no second process nor sandbox. Empty: the family has none (the checks
    then strip comments themselves)."""

    compile_flags: tuple[str, ...] = ()  # added to the compile (not to the command shown)
    saved: str = ""  # what the compile leaves in its folder (line markers included)


@dataclass(frozen=True)
class DependencyList:
    """How a compile also writes the list of the files it read (make's format), so that a
    graded build is judged by what the compiler really opened: flags added to the compile (not
    to the command shown) and the file they leave beside its product. Empty: the family has
    none (the box alone decides what it can open)."""

    flags: tuple[str, ...] = ()
    file: str = ""


@dataclass(frozen=True)
class ProcResult:
    """A finished child process, whatever the way it ended."""

    argv: tuple[str, ...]
    returncode: int | None  # None when it could not start
    timed_out: bool = False
    interrupted: bool = False
    output: str = ""
    truncated: bool = False
    seconds: float = 0.0
    start_error: str | None = None  # e.g. "No such file or directory"
    limit: str | None = None  # "memory", "tasks", "file size": what the isolation layer saw hit
    notes: tuple[str, ...] = ()  # what the cleanup did (files removed, processes killed)

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return _signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.interrupted

    def describe(self) -> str:
        """How it ended, in words: 'exit code 3', 'killed by SIGSEGV', 'timed out after 2 s'."""
        if self.start_error is not None:
            return f"could not start: {self.start_error}"
        if self.interrupted:
            return "interrupted"
        if self.timed_out:
            return "timed out"
        if self.limit is not None:
            return f"stopped at the {self.limit} limit"
        if self.signal_name is not None:
            return f"killed by {self.signal_name}"
        return f"exit code {self.returncode}"


@dataclass(frozen=True)
class StackFrame:
    """One function's stack frame as its compiler measured it (gcc's -fstack-usage): what tells
    a stack overflow (3 GB of local arrays in main) from a bad access when a program dies of
    SIGSEGV."""

    function: str  # as the compiler names it (gfortran's main program: MAIN__)
    line: int | None  # in the cell or file
    size: int  # bytes
    dynamic: bool = False  # it also takes room known only at run time (VLAs, alloca)


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    command: tuple[str, ...]
    proc: ProcResult | None  # None when the build came from the cache
    output: str  # diagnostics, temporary paths replaced by the source's name
    cached: bool
    key: str
    build_dir: Path | None
    executable: Path | None = None  # only set when ok and linked
    object_file: Path | None = None
    seconds: float = 0.0
    nodes: tuple[str, ...] = ()  # where the compiler ran, when it ran as a cluster job step
    # A graded build that read files from outside the submission and the system's folders:
    # what it read ("" when nothing such); the build is then not ok.
    refused: str = ""
    # The largest stack frames of its functions, largest first, when the compiler said them.
    frames: tuple[StackFrame, ...] = ()


@dataclass(frozen=True)
class ConstructRan:
    """One OpenACC compute construct a run executed (profile/regions.py)."""

    count: int  # times it started
    line: int | None = None  # its source line, when known
    function: str = ""  # the function it is in (gcc: the one its code ended up in), "" unknown
    file: str = ""
    site: int | None = None  # gcc: the address of its call in the executable


# counted: the record was read. not_loaded: no record at all (the runtime did not load the
# library, or it could not be built). unfinished: the library loaded but the program did not
# end through exit() (killed, crashed, _exit). unreadable: what the run left in the record's
# place is not one (a link, a FIFO, too large, garbled).
RegionsState = Literal["counted", "not_loaded", "unfinished", "unreadable"]


@dataclass(frozen=True)
class RegionsRan:
    """Which compute constructs a checked OpenACC run executed, counted by the OpenACC
    profiling interface: one per construct, the same construct however often it ran."""

    state: RegionsState
    constructs: tuple[ConstructRan, ...] = ()
    lost: int = 0  # starts the library could not attribute (more constructs than its table)
    why: str = ""  # for a state other than counted: one sentence

    @property
    def counted(self) -> bool:
        return self.state == "counted"

    @property
    def distinct(self) -> int:
        return len(self.constructs)


@dataclass(frozen=True)
class RunResult:
    command: tuple[str, ...]
    proc: ProcResult
    missing_files: tuple[str, ...] = ()  # --get files the program did not write
    nodes: tuple[str, ...] = ()  # the node of each task (rank order), when run as a job step
    # A graded run: the grader's own folder holding what it took out of the run's folder for
    # the checks (run/boundary.py); None: the files are in the request's working folder.
    outputs: Path | None = None
    # The compute constructs it executed, for a checked OpenACC run (None: not counted).
    regions: RegionsRan | None = None
    lane: str = ""  # the lane it ran in, in words ("GPU 0 alone, CPUs 14-15"); "": none
    # Why the grader read no more of what it left (run/allowance.py: past the row's allowance of
    # bytes, records or files): the run then fails at the "evidence" limit. "": all read.
    refused: str = ""

    @property
    def ok(self) -> bool:
        return self.proc.ok

    @property
    def failed(self) -> bool:
        """The run failed: its process (an exit status, a signal, a limit, not started), a file
        it had to leave missing, or more evidence than the grader reads."""
        return not self.proc.ok or bool(self.missing_files) or bool(self.refused)


Step = Literal["compile", "run", "check"]


class FailureKind(enum.Enum):
    """Every way a request can fail, closed: exit codes, hints and report reasons derive from it."""

    COMPILE_ERROR = "compile error"
    COMPILE_TIMEOUT = "compile timeout"
    NOT_STARTED = "could not start"  # the compiler, program or launcher could not be executed
    TIMEOUT = "timeout"
    LIMIT = "limit"  # memory, tasks or file size: Failure.limit says which
    SIGNAL = "signal"
    EXIT_STATUS = "exit status"
    MISSING_FILES = "missing files"  # --get named files the program did not write
    INTERRUPTED = "interrupted"
    CHECK = "check"  # built and ran, but the exercise's checks failed

    @property
    def step(self) -> Step:
        if self in (FailureKind.COMPILE_ERROR, FailureKind.COMPILE_TIMEOUT):
            return "compile"
        return "check" if self is FailureKind.CHECK else "run"


@dataclass(frozen=True)
class Failure:
    """Why a request failed, as data; display.py renders it."""

    kind: FailureKind
    what: str  # in words: "exit code 1", "killed by SIGSEGV", "timed out after 2 s", ...
    command: tuple[str, ...] = ()
    output: str = ""
    hint: str = ""
    compile_step: bool = False  # NOT_STARTED / INTERRUPTED while compiling, not running
    limit: str | None = None  # LIMIT, or a TIMEOUT that followed a limit: "memory", "tasks", ...

    @property
    def step(self) -> Step:
        return "compile" if self.compile_step else self.kind.step


@dataclass(frozen=True)
class ImplicitData:
    """One variable a compute region uses without a data clause naming it."""

    variable: str
    line: int | None  # source line of the construct, when known
    construct: str  # "parallel", "kernels", "serial"
    detail: str  # one readable sentence for the student


# What a remark of the compiler is about: a compute region made, a data clause's movement, a
# movement the compiler added (no clause names the data), the way a loop is run.
RemarkKind = Literal["region", "data", "implicit", "loop", "remark"]


@dataclass(frozen=True)
class Remark:
    """What the compiler's report says of one line of the source (not an error)."""

    line: int
    text: str  # the compiler's own words (or the finding, from gcc's dumps)
    meaning: str = ""  # one line for a student (toolchains/remarks.py)
    kind: RemarkKind = "remark"


@dataclass(frozen=True)
class Diagnostic:
    """One message of the compiler about a line of a file: an error, a warning, a note, or a
    remark of its optimisation report (gcc's "optimized")."""

    file: str  # as the build's output names it: the cell's or the file's name, or a header
    line: int
    column: int | None
    severity: str  # "error", "warning", "note", "optimized", "missed", "info"
    message: str
    code: str = ""  # the source line it is about, when known


@dataclass(frozen=True)
class AccReport:
    """What a build did with the program's OpenACC directives."""

    regions: int  # compute regions the compiler created, in code the program can reach
    implicit: tuple[ImplicitData, ...]
    method: str  # how this was found out, for messages and logs
    omp_targets: int = 0  # OpenMP target regions (offloadable code), in reachable code
    # Compute regions the compiler created in functions the program never calls (gcc: its call
    # graph from main), or dropped with them: not counted in `regions`, never run.
    unreachable: int = 0
    # What the report says line by line (regions, data movements, loops), for the annotated
    # source; not what the checks decide on (nor what two reports compare on).
    remarks: tuple[Remark, ...] = field(default=(), compare=False)
    # What the compiler says each construct moves, array by array (nvhpc's -Minfo names them;
    # empty where the report does not: gcc's dumps give only the implicit ones above).
    moves: tuple[DataMove, ...] = ()


@dataclass(frozen=True)
class DataMove:
    """An array a construct moves or expects, as the compiler's report says it."""

    variable: str
    clause: str  # copy, copyin, copyout, create, present, update device, ...
    line: int  # the construct's line in the source
    implicit: bool  # no clause named it: the compiler chose


# incomplete: the check could not be evaluated (no GPU trace, no compiler report, no solution
# output): never a pass.
CheckStatus = Literal["pass", "fail", "incomplete"]

# The verdict's words: one per status, for a check and for a whole verdict, the same in the
# output, the exit codes' help, the reports and the course's notebooks (00_how_to_use says what
# each one means, in these words: tests/test_words_table.py reads them there).
VERDICT_WORDS: dict[CheckStatus, str] = {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}
VERDICT_MEANINGS: dict[CheckStatus, str] = {
    "pass": "every check passed",
    "fail": "a check failed: the table says which and why; correct the program and run the "
            "cell again",
    "incomplete": "no check failed, but some could not be evaluated on this machine (those that "
                  "need a GPU, on a machine without one): solved as far as this machine can tell",
}


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: CheckStatus
    expected: str = ""
    got: str = ""
    reason: str = ""
    # Grading: the hidden argument set (1-based) the check was evaluated on, 0 for the public
    # run, and the check's kind: a student's feedback shows those, never the values.
    hidden: int = 0
    kind: str = ""
    # incomplete only because the run was not on a GPU (a GPU trace check on a host build): the
    # verdict then says so (kinds.PASSED_HERE) when nothing else was left unevaluated.
    gpu_only: bool = False
    # The position of its [[check]] in the spec (check[N]): its points and what a student sees
    # of it are the spec's, looked up when scored or shown; -1 for idrrun's own rows.
    check: int = -1
    # The source line it is about, when it has one (the implicit copy, the directive found).
    line: int | None = None
    # The lines of the program's output around what it read (numbered), or its last lines
    # when what it looked for is not there; "" when the check reads no output.
    excerpt: str = ""
    # The spec's regular expression, for the teacher's report: a student reads words.
    pattern: str = ""
    # The share of its points a passed check earns, where it earns them in part (a `speed`
    # check's scale: checks/ratio.py); None: all of them.
    credit: float | None = None


@dataclass(frozen=True)
class Figure:
    """One figure of the run beside the solution's, for the same arguments and toolchain."""

    label: str  # "data moved per iteration"
    yours: str  # "1.07 GB", "none"
    solution: str
    source: str  # where it comes from: "trace" or "compiler"


@dataclass(frozen=True)
class Comparison:
    """The run's figures beside the solution's (checks/compare.py), for the checks that come
    from the GPU trace or the compiler's report; the two timelines when both were drawn."""

    figures: tuple[Figure, ...]
    notes: tuple[str, ...] = ()  # what the figures can and cannot say
    timeline: Path | None = None  # the run's timeline PNG
    solution_timeline: Path | None = None


@dataclass(frozen=True)
class Verdict:
    exercise: str
    checks: tuple[CheckResult, ...]
    # As a student's notebook shows it: grading runs more than these checks (hidden cases,
    # checks run at grading only or hidden from students), which the verdict says, not names.
    more_at_grading: bool = False
    # The run beside the solution (None: nothing to compare, or no solution to compare with).
    comparison: Comparison | None = None
    # The wall times of the runs of the build that measured its timed checks, the checked run
    # first (checking._measured; s); () where no timed check repeated it.
    run_times: tuple[float, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.status == "pass" for c in self.checks)

    @property
    def status(self) -> CheckStatus:
        """The verdict's status: its word is VERDICT_WORDS[status]."""
        return "pass" if self.passed else "incomplete" if self.incomplete else "fail"

    @property
    def incomplete(self) -> bool:
        """Nothing failed, but something could not be evaluated."""
        return not self.failed_checks and any(c.status == "incomplete" for c in self.checks)

    @property
    def passed_here(self) -> bool:
        """INCOMPLETE as a machine without a GPU says it: every check it can evaluate passed,
        and only checks that need a GPU were left (gpu_checks)."""
        return self.incomplete and all(c.gpu_only for c in self.incomplete_checks)

    @property
    def gpu_checks(self) -> tuple[CheckResult, ...]:
        """The checks left for a GPU to evaluate."""
        return tuple(c for c in self.checks if c.status == "incomplete" and c.gpu_only)

    @property
    def incomplete_checks(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status == "incomplete")

    @property
    def failed_checks(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status == "fail")
