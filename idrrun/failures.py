"""What a failed compile or run says, as data (STYLE.md 6, 15): its kind (FailureKind), the
step, the command and the output as the student knows their files (the build's temporary
names renamed), and a hint: what the signal, the limit or the exit status most likely means.

    compile_failure(BuildResult, RunRequest) -> Failure
    run_failure(RunResult, RunRequest, frames) -> Failure   (a run that failed: RunResult.failed)

pipeline.py calls them when a step failed (a run that went well does not come here); the
wording is kept here, apart from the ladder of stages. The output renamed as it comes is
build.Renamed's (the build's names are build.py's).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import build as build_mod
from .model import BuildResult, Failure, FailureKind, RunRequest, RunResult, StackFrame, Target
from .run import allowance
from .run.stack import DEFAULT as DEFAULT_STACK, Stack, size_text
from .toolchains import explain
from .toolchains.diagnostics import student_symbol


_SIGNAL_HINTS = {
    "SIGSEGV": "the program touched memory it does not own: check array bounds, and on a GPU "
               "that every array used in a compute region is in a data clause",
    "SIGBUS": "bad memory access: check array bounds and alignment",
    "SIGFPE": "arithmetic error, e.g. an integer division by zero",
    "SIGABRT": "the program aborted: read the runtime's message above (assert, double free, "
               "OpenACC runtime error)",
    "SIGKILL": "killed from outside: out of memory, or a limit was reached",
    "SIGILL": "illegal instruction: built for another processor?",
}


STACK_OVERFLOW = ("the stack overflowed, most likely: {where} on the stack (its local arrays, as the "
                  "compiler measured them), and the program's stack is {stack}. Raise it with "
                  "--stack (e.g. --stack 8GiB, or --stack unlimited), or allocate these arrays "
                  "(malloc, ALLOCATABLE)")


_LIMIT_HINTS = {
    "memory": "the program used more memory than allowed ([limits] memory in the config, "
              "--memory on the line); check the sizes it allocates",
    "tasks": "the program started too many processes or threads (a fork in a loop?); the limit "
             "is [limits] tasks, --tasks",
    "file size": "the program wrote a file larger than allowed ([limits] file_size, --file-size); "
                 "the truncated file was removed",
    "disk": "the program wrote too much in its folder (a sandboxed run may leave 1 GiB and "
            "20 000 files at most)",
}


def compile_failure(result: BuildResult, request: RunRequest) -> Failure:
    p = result.proc
    assert p is not None
    if p.timed_out:
        kind = FailureKind.COMPILE_TIMEOUT
        what = f"compile timeout after {request.compile_timeout:g} s"
        hint = ("the compiler ran past compile_timeout: look for an #include of the file itself "
                "or a huge generated source")
    elif p.start_error is not None:
        kind, what, hint = FailureKind.NOT_STARTED, p.describe(), "is the compiler installed and executable?"
    elif p.interrupted:
        kind, what, hint = FailureKind.INTERRUPTED, "interrupted", "the build was interrupted"
    elif result.refused:
        kind, what = FailureKind.COMPILE_ERROR, "refused"
        hint = result.refused
    else:
        kind, what = FailureKind.COMPILE_ERROR, p.describe()
        hint = explain.compile_hint(p.output, request.source) or (
            f"fix the first error above; line numbers are those of {request.source.name}"
            if p.returncode else "the compiler produced no output file")
    return Failure(kind=kind, what=what, command=build_mod.shown_command(result.command, request.source),
                   output=result.output, hint=hint, compile_step=True)


def _segv_hint(frames: Sequence[StackFrame], stack: int | None) -> str:
    """A SIGSEGV's hint: a stack overflow when the compiler measured a frame of at least half
    the stack (a run-away recursion of small frames stays a bad access); array bounds otherwise,
    and the stack too where the frame sizes are unknown or only known at run time."""
    big = [f for f in frames if stack is not None and f.size >= stack // 2]
    if big:
        where = ", ".join(f"{_function(f)} keeps {size_text(f.size)}" for f in big[:3])
        return STACK_OVERFLOW.format(where=where, stack=size_text(stack or 0))
    dynamic = [f for f in frames if f.dynamic]
    if not frames or dynamic:
        sized = f" ({', '.join(_function(f) for f in dynamic[:3])} size arrays at run time)" \
            if dynamic else ""
        return f"{_SIGNAL_HINTS['SIGSEGV']}; or its stack overflowed{sized}: --stack raises the limit"
    return _SIGNAL_HINTS["SIGSEGV"]


# What a run's stack raised from its frames (run/stack.py) is told, in a note.
STACK_RAISED = ("stack raised to {size} for this run: {where} on the stack, as the compiler "
                "measured it, more than the default {default} (--stack SIZE sets it yourself)")
STACK_PAST_MEMORY = ("{where} on the stack, as the compiler measured it: more than this "
                     "machine's memory ({memory}); allocate these arrays (malloc, ALLOCATABLE)")


def stack_note(stack: Stack, memory: int) -> str:
    """The note of a stack raised from the frames, or of a frame nothing could hold; "" when
    the stack is the request's."""
    frame = stack.frame
    if frame is None:
        return ""
    where = f"{_function(frame)} keeps {size_text(frame.size)}"
    if not stack.fits:
        return STACK_PAST_MEMORY.format(where=where, memory=size_text(memory))
    return STACK_RAISED.format(size=size_text(stack.limits.stack or 0), where=where,
                               default=size_text(DEFAULT_STACK or 0))


def _function(frame: StackFrame) -> str:
    name = student_symbol(frame.function) or frame.function
    return f"{name} (line {frame.line})" if frame.line is not None else name


# A program sized for a GPU, its regions run on the host's cores instead: the course's timings
# are those of a GPU, tens to hundreds of times the host's speed on their loops.
_ON_HOST = (" Its OpenACC regions ran on the host (no GPU build): a program sized for a GPU can "
            "take far longer here; a smaller problem (--cliopts) or a GPU machine will finish.")


def run_failure(result: RunResult, request: RunRequest,
                frames: Sequence[StackFrame] = (), target: Target = "none") -> Failure:
    """The failure of a run that failed (result.failed). frames: the program's largest stack
    frames (BuildResult.frames), which tell a stack overflow from a bad access; target: where
    its OpenACC regions ran (Toolchain.target), which explains a timeout on the host."""
    p = result.proc
    limit = p.limit
    if p.start_error is not None:
        kind, what = FailureKind.NOT_STARTED, p.describe()
        hint = "the program or its launcher could not be started"
    elif p.interrupted:
        kind, what = FailureKind.INTERRUPTED, "interrupted"
        hint = "the run was interrupted; its output so far is kept above"
    elif p.limit is not None:
        kind, what = FailureKind.LIMIT, f"{p.limit} limit reached"
        if p.timed_out:
            kind, what = FailureKind.TIMEOUT, what + f", then timed out after {request.timeout:g} s"
        hint = _LIMIT_HINTS.get(p.limit, "the program went past a limit of the run")
    elif p.timed_out:
        kind, what = FailureKind.TIMEOUT, f"timed out after {request.timeout:g} s"
        hint = ("the program ran past --timeout: an endless loop, or a wait on something that "
                "never comes? If it really needs longer, raise --timeout")
        if request.acc and target == "host":
            hint += "." + _ON_HOST
    elif p.signal_name is not None:
        kind, what = FailureKind.SIGNAL, f"killed by {p.signal_name}"
        hint = explain.run_hint(p.output, request.source) or (
            _segv_hint(frames, request.limits.stack) if p.signal_name == "SIGSEGV" else
            _SIGNAL_HINTS.get(p.signal_name, "the program was stopped by a signal"))
    elif p.returncode != 0:
        kind, what = FailureKind.EXIT_STATUS, f"exit code {p.returncode}"
        hint = explain.run_hint(p.output, request.source) or \
            "the program returned a non-zero status, which means failure"
    elif result.refused:
        kind, what, limit = FailureKind.LIMIT, f"{allowance.EVIDENCE_LIMIT} limit reached", \
            allowance.EVIDENCE_LIMIT
        hint = f"the program left more than the grader reads: {result.refused}"
    else:
        kind, what = FailureKind.MISSING_FILES, "missing output files"
        hint = f"--get named files the program did not write: {', '.join(result.missing_files)}"
    return Failure(kind=kind, what=what,
                   command=build_mod.shown_command(result.command, request.source),
                   output=build_mod.rename_paths(p.output, request.source), hint=hint, limit=limit)
