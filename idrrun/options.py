"""THE option spec, shared by %%idrrun, %idrrunfile and `idrrun run`.

Flags follow the IDRIS `%%idrrun` magic that course teachers know, parsed with shlex so quoted
and unquoted values both work (`--accopts cc70,pinned`, `--accopts "cc70,pinned"`,
`--options "-O3 -g"`). After this module nothing sees a string that still needs splitting.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import UsageError
from .model import FAMILY_NAMES, LANGUAGES, FamilyName, Language

# Options whose value is a string of several words. Their value may start with "-" (compiler
# flags), which argparse would take for an option: they are glued as --flag=VALUE first.
_WORD_LIST_OPTIONS = ("--options", "--option", "--cliopts", "--accopts")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        # Only --help ends up here: print it and stop without running anything.
        if message:
            print(message)
        raise _HelpShown()


class _HelpShown(Exception):
    pass


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


NO_LIMIT = -1  # "--memory none": no limit, as opposed to None, "not given"


def _size(text: str) -> int:
    from .config import parse_size

    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return NO_LIMIT if value is None else value


def _tasks(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tasks, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of tasks >= 0, got {value}")
    return value or NO_LIMIT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare every build-and-run option once; the magics and the CLI all call this."""
    g = parser.add_argument_group("compile")
    g.add_argument("-a", "--acc", action="store_true", help="turn OpenACC on")
    g.add_argument(
        "--accopts", metavar="LIST",
        help="OpenACC target options, comma separated (cc80,pinned,managed...): -gpu= for "
        "nvhpc, -ta=tesla: for pgi; gcc uses ccXY for -misa=sm_XY and reports the rest as ignored",
    )
    g.add_argument(
        "--options", "--option", dest="options", metavar='"FLAGS"',
        help='extra compiler flags, e.g. --options "-O3 -g"',
    )
    g.add_argument("-l", "--language", type=str.lower, choices=LANGUAGES,
                   help="source language (default: from config, else guessed from the code)")
    g.add_argument("-c", "--compiler", type=str.lower, choices=FAMILY_NAMES,
                   help="compiler family (default: from config, else nvhpc when nvc is installed, else gcc)")
    g.add_argument("-t", "--openmp", action="store_true", help="turn OpenMP on")
    g.add_argument("--threads", type=_positive_int, metavar="N",
                   help="OMP_NUM_THREADS for the program (implies nothing else)")
    g.add_argument("-m", "--mpi", type=_positive_int, metavar="N",
                   help="build with the MPI wrappers and run N ranks through the launcher")
    g.add_argument("-n", "--noexec", action="store_true", help="build only, do not run")
    g.add_argument("--object", action="store_true", help="compile to an object file only")
    g.add_argument("-k", "--keep", metavar="NAME", help="also save the source under NAME")
    g.add_argument("--force", action="store_true", help="rebuild even if the build is cached")
    r = parser.add_argument_group("run")
    r.add_argument("--cliopts", metavar='"ARGS"', help='program arguments, e.g. --cliopts "100 \'a b\'"')
    r.add_argument("-g", "--gpus", type=_positive_int, metavar="N", help="GPUs to ask the launcher for")
    r.add_argument("--get", nargs="+", metavar="FILE", default=[],
                   help="files the program writes; listed after the run, missing ones reported")
    r.add_argument("--notime", action="store_true", help="do not show timings")
    r.add_argument("--profile", action="store_true",
                   help="show where the GPU time went: Nsight Systems when installed, else the "
                        "built-in CUPTI tracer; a summary and a timeline follow the output")
    r.add_argument("--profiler", choices=("auto", "nsys", "builtin"), metavar="auto|nsys|builtin",
                   help="which profiler --profile uses (implies --profile)")
    r.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="kill the program after this many seconds (default from config: 300)")
    r.add_argument("--no-raise", dest="no_raise", action="store_true",
                   help="a failure is reported but does not fail the cell")
    r.add_argument("--stdin", metavar="FILE", help="standard input for the program (default: none, EOF at once)")
    r.add_argument("--memory", type=_size, metavar="SIZE", help="memory limit, e.g. 4GiB ('none': no limit)")
    r.add_argument("--tasks", type=_tasks, metavar="N", help="most processes and threads at once (0: no limit)")
    r.add_argument("--file-size", dest="file_size", type=_size, metavar="SIZE",
                   help="largest file the program may write, e.g. 1GiB")
    r.add_argument("--max-output", dest="max_output", type=_size, metavar="SIZE",
                   help="output kept and shown, e.g. 1MiB")
    c = parser.add_argument_group("check")
    c.add_argument("--check", "--exercise", dest="check", metavar="NAME",
                   help="check the result against the exercise NAME (see examples/)")


@dataclass(frozen=True)
class Options:
    """What the user typed, typed. Unset values are None; config fills them later."""

    acc: bool = False
    accopts: tuple[str, ...] = ()
    compiler_options: tuple[str, ...] = ()
    program_args: tuple[str, ...] = ()
    language: Language | None = None
    family: FamilyName | None = None
    openmp: bool = False
    threads: int | None = None
    mpi: int | None = None
    gpus: int | None = None
    get: tuple[str, ...] = ()
    notime: bool = False
    profile: str | None = None  # "auto", "nsys", "builtin"; None: not profiled
    noexec: bool = False
    object: bool = False
    keep: str | None = None
    timeout: float | None = None
    force: bool = False
    no_raise: bool = False
    check: str | None = None
    stdin: str | None = None
    memory: int | None = None  # bytes; NO_LIMIT for "none"
    tasks: int | None = None
    file_size: int | None = None
    max_output: int | None = None
    file: str | None = None  # %idrrunfile / idrrun run


def _split(value: str | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    try:
        return tuple(shlex.split(value))
    except ValueError as exc:
        raise UsageError(f"{what}: {exc} in {value!r}") from None


def split_accopts(value: str | None) -> tuple[str, ...]:
    """`cc70,pinned` or `"cc70 pinned"` -> ("cc70", "pinned")."""
    words = _split(value, "--accopts")
    return tuple(item for word in words for item in word.split(",") if item)


def glue_word_lists(tokens: Sequence[str]) -> list[str]:
    """["--options", "-O3"] -> ["--options=-O3"], so a value may start with a dash."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _WORD_LIST_OPTIONS and i + 1 < len(tokens):
            out.append(f"{token}={tokens[i + 1]}")
            i += 2
        else:
            out.append(token)
            i += 1
    return out


def from_namespace(ns: argparse.Namespace) -> Options:
    return Options(
        acc=ns.acc,
        accopts=split_accopts(ns.accopts),
        compiler_options=_split(ns.options, "--options"),
        program_args=_split(ns.cliopts, "--cliopts"),
        language=ns.language,
        family=ns.compiler,
        openmp=ns.openmp,
        threads=ns.threads,
        mpi=ns.mpi,
        gpus=ns.gpus,
        get=tuple(ns.get or ()),
        notime=ns.notime,
        profile=ns.profiler or ("auto" if ns.profile else None),
        noexec=ns.noexec,
        object=ns.object,
        keep=ns.keep,
        timeout=ns.timeout,
        force=ns.force,
        no_raise=ns.no_raise,
        check=ns.check,
        stdin=ns.stdin,
        memory=ns.memory,
        tasks=ns.tasks,
        file_size=ns.file_size,
        max_output=ns.max_output,
        file=getattr(ns, "file", None),
    )


def make_parser(prog: str, with_file: bool) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, add_help=True, allow_abbrev=False,
                     description="Compile and run C/C++/Fortran/CUDA code with OpenACC.")
    add_arguments(parser)
    if with_file:
        parser.add_argument("file", metavar="FILE", help="the source file")
    return parser


def parse_line(line: str, prog: str = "%%idrrun", with_file: bool = False) -> Options | None:
    """Parse a magic line. None when --help was asked (the help has been printed)."""
    try:
        tokens = shlex.split(line, comments=False)
    except ValueError as exc:
        raise UsageError(f"{prog}: cannot read the line: {exc}") from None
    return parse_tokens(tokens, prog=prog, with_file=with_file)


def parse_tokens(tokens: Sequence[str], prog: str, with_file: bool) -> Options | None:
    parser = make_parser(prog, with_file)
    try:
        ns = parser.parse_args(glue_word_lists(tokens))
    except _HelpShown:
        return None
    return from_namespace(ns)


def help_text(prog: str, with_file: bool) -> str:
    return make_parser(prog, with_file).format_help()
