"""THE option spec, shared by %%idrrun, %idrrunfile and `idrrun run`.

Each flag is declared once, as a field of `Options`, with every fact about it: its spellings,
help, parser, and — when it has one — the RunRequest field it sets (`to`), the config key and the
environment variable that give it a value when the line does not (request/config.py reads them
from here); whether it does anything without a run (request/unused.py), whether a graded line
keeps it (request/policy.py), and its row in README's flag table (tests/test_options.py holds
the table to it). A field left None means "not given": request/resolve.py applies the layers in
one place.

Flags follow the IDRIS `%%idrrun` magic that course teachers know, parsed with shlex so quoted
and unquoted values both work (`--accopts cc70,pinned`, `--accopts "cc70,pinned"`,
`--options "-O3 -g"`). After this module nothing sees a string that still needs splitting.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError, closest, did_you_mean
from ..model import LANGUAGES, Language
from ..toolchains import registry

NO_LIMIT = -1  # "--memory none": no limit, as opposed to None, "not given"
SAME = "="  # `to` default: the RunRequest field of the same name


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of the parser and of its sub-commands' parsers."""
    names: list[str] = []
    for action in parser._actions:
        names += action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                names += option_names(sub)
    return names


# A word of one dash and a name: argparse reads `-check` as `-c heck` (a short option and its
# glued value). When it is (nearly) a long option's name, it is a typo of that option.
_ONE_DASH = re.compile(r"-([A-Za-z][A-Za-z0-9_-]+)(?:=.*)?")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def check_one_dash(parser: argparse.ArgumentParser, tokens: Sequence[str]) -> None:
    """UsageError for a word of one dash that names a long option (`-check`: --check), before
    argparse reads it as a short option and its value. Words after "--" are names."""
    longs = [n for n in option_names(parser) if n.startswith("--")]
    said: list[str] = []  # every typo of the line at once: a second run finds no second one
    for token in tokens:
        if token == "--":
            break
        match = _ONE_DASH.fullmatch(token)
        if match is None or token in option_names(parser):
            continue
        name = token.split('=', 1)[0]
        meant = closest(f"-{name}", longs, cutoff=0.85) or _shortened(name[1:], longs)
        if meant is not None:
            said.append(f"{token} is not an option (it reads as {token[:2]} {token[2:]}): "
                        f"did you mean {meant}?")
    if said:
        raise UsageError(f"{parser.prog}: " + "; ".join(said))


def _shortened(name: str, longs: Sequence[str]) -> str | None:
    """The one long option that `name` shortens by leaving letters out (`opts`: --options, as
    IDRIS's notebooks spell it), from its first two letters on; None when none or several do."""
    if len(name) < 3:
        return None
    pattern = re.compile(".*".join(map(re.escape, name)))
    found = [long for long in longs
             if long[2:4] == name[:2] and pattern.match(long[2:]) is not None]
    return found[0] if len(found) == 1 else None


def suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """What to add to argparse's error: the option or the choice meant."""
    unknown = _UNRECOGNIZED.search(message)
    if unknown:
        said = [did_you_mean(word.split("=", 1)[0], option_names(parser))
                for word in unknown.group(1).split() if word.startswith("-")]
        return "".join(dict.fromkeys(s for s in said if s))
    choice = _INVALID_CHOICE.search(message)
    if choice:
        return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
    return ""


class SuggestingParser(argparse.ArgumentParser):
    """argparse whose errors are UsageErrors that say what was meant: "did you mean
    --cliopts?" for a typo of a flag or of a choice."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}{suggestion(self, message)}")

    def parse_tokens(self, tokens: Sequence[str]) -> argparse.Namespace:
        """parse_args, after check_one_dash."""
        check_one_dash(self, tokens)
        return self.parse_args(list(tokens))


_Parser = SuggestingParser


class _HelpAsked(Exception):
    pass


class _AskForHelp(argparse.Action):
    """-h/--help: argparse's own action prints the help itself, wherever stdout goes; this one
    only says it was asked, and the caller prints it or not (a grader never does: a student's
    line must not write into its --json output)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help="show this help message and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        raise _HelpAsked()


# ---------------------------------------------------------------------------------------
# Value parsers: a text in, a typed value out, argparse.ArgumentTypeError with the reason.


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: object) -> int | None:
    """"2GiB", "512 MiB", "1g", 1048576 -> bytes; "none", "unlimited" or 0 -> None.

    Raises ValueError with a readable message otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 2GiB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a size >= 0, got {value}")
        return value or None
    if isinstance(value, str):
        if value.strip().lower() in ("none", "unlimited", "0"):
            return None
        m = _SIZE.match(value)
        if m:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ValueError(f"expected a size such as 2GiB or 512MiB, got {value!r}")


def size(text: str) -> int:
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return NO_LIMIT if value is None else value


def output_cap(text: str) -> int:
    value = size(text)
    if value == NO_LIMIT:
        raise argparse.ArgumentTypeError("the output cap cannot be unlimited")
    return value


def tasks(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tasks, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of tasks >= 0, got {value}")
    return value or NO_LIMIT


def on_off(text: str) -> bool:
    value = text.strip().lower()
    if value in ("on", "yes", "true", "1"):
        return True
    if value in ("off", "no", "false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


def words(text: str) -> tuple[str, ...]:
    """A string of several words, shell-quoted: `"-O3 -g"`, `"1 'two words'"`."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} in {text!r}") from None


def split_accopts(text: str) -> tuple[str, ...]:
    """`cc70,pinned` or `"cc70 pinned"` -> ("cc70", "pinned")."""
    return tuple(item for word in words(text) for item in word.split(",") if item)


# ---------------------------------------------------------------------------------------
# The declaration of one flag


@dataclass(frozen=True)
class FlagSpec:
    names: tuple[str, ...]
    help: str
    group: str  # "compile", "run", "check": sections of --help
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  # None: a switch that stores `const`
    const: Any = True
    choices: Callable[[], Sequence[str]] | None = None  # asked when the parser is made
    many: bool = False  # one or more values (--get a b c)
    word_list: bool = False  # the value may start with "-": glued as --flag=VALUE before parsing
    to: str | None = SAME  # the RunRequest field it sets ("limits.memory"); None: front ends use it
    setting: str | None = None  # config key giving its value when the line does not
    env: str | None = None  # environment variable giving its value (over the config files)
    # Acts on the program's run only: with -n or --object a note says it can do nothing.
    run_only: bool = False
    # A graded notebook's line keeps it; the grader decides every other flag (request/policy.py).
    graded_line: bool = False
    # The meaning column of its row in README's flag table (Markdown). Flags declared side by
    # side with the same text share one row: a pointer to the section that says more.
    readme: str = ""
    # Other spellings storing into the same field: ((names, const-or-parse-spec), ...)
    variants: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = ()


def flag(*names: str, help: str, readme: str, group: str = "run", **kw: Any) -> Any:
    return field(default=None, metadata={"flag": FlagSpec(names=names, help=help, readme=readme,
                                                          group=group, **kw)})


def _profilers() -> Sequence[str]:
    return ("auto", "nsys", "builtin")


_LIMITS = "per-run limits (see [Limits](#limits-and-protection-against-hostile-programs) below)"


@dataclass(frozen=True)
class Options:
    """What the user typed, typed. None: not given (the layers in resolve.py decide)."""

    acc: bool | None = flag("-a", "--acc", group="compile", help="turn OpenACC on", graded_line=True,
                            readme="OpenACC on (`-acc` for nvhpc/pgi, `-fopenacc` for gcc)")
    accopts: tuple[str, ...] | None = flag(
        "--accopts", group="compile", metavar="LIST", parse=split_accopts, word_list=True,
        graded_line=True,
        help="OpenACC target options, comma separated (cc80,pinned,managed...): -gpu= for "
             "nvhpc, -ta=tesla: for pgi; gcc uses ccXY for -misa=sm_XY and reports the rest as ignored",
        readme="target options, comma separated: `-gpu=LIST` (nvhpc), `-ta=tesla:LIST` (pgi); for "
               "gcc `ccXY` selects `-misa=sm_XY`, `gpu` builds for a GPU, `host` (or `multicore`) "
               "for the host, and the rest (`pinned`, `managed`…) is reported as ignored")
    compiler_options: tuple[str, ...] | None = flag(
        "--options", "--option", group="compile", metavar='"FLAGS"', parse=words, word_list=True,
        help='extra compiler flags, e.g. --options "-O3 -g"',
        readme="extra compiler flags; with gcc, the NVIDIA ones the IDRIS notebooks pass "
               "(`-mp=gpu -gpu=cc70 -Minfo=all`, `-acc`, `-fast`, `-Mcudalib=curand`…) are "
               "translated, each with a note, and the others refused with one message (see "
               "\"GCC and GPUs\")")
    language: Language | None = flag(
        "-l", "--language", group="compile", parse=str.lower, choices=lambda: LANGUAGES, to=None,
        setting="language", env="IDRRUN_LANGUAGE", graded_line=True,
        help="source language (default: from config, else guessed from the code)",
        readme="language; default from config, else guessed from the code (shown)")
    family: str | None = flag(
        "-c", "--compiler", group="compile", parse=str.lower, choices=registry.names, to=None,
        setting="family", env="IDRRUN_FAMILY",
        help="compiler family (default: from config, else detected: nvhpc when nvc is installed, else gcc)",
        readme="compiler family; default from config, else nvhpc when `nvc` is on PATH, else gcc")
    openmp: bool | None = flag("-t", "--openmp", group="compile", help="turn OpenMP on",
                               graded_line=True, readme="OpenMP on")
    threads: int | None = flag("--threads", parse=positive_int, metavar="N", run_only=True,
                               graded_line=True,
                               help="OMP_NUM_THREADS for the program (implies nothing else)",
                               readme="`OMP_NUM_THREADS` for the program only (a note says when it "
                                      "can have no effect: no OpenMP build)")
    mpi_ranks: int | None = flag("-m", "--mpi", group="compile", parse=positive_int, metavar="N",
                                 help="build with the MPI wrappers and run N ranks through the launcher",
                                 readme="build with the MPI wrappers, run N ranks (`mpirun -np N` "
                                        "by default)")
    execute: bool | None = flag("-n", "--noexec", group="compile", const=False,
                                help="build only, do not run", readme="build only")
    object_only: bool | None = flag(
        "--object", group="compile", help="compile to an object file only",
        readme="compile to an object file in the working directory: `NAME.o` after `--keep NAME`, "
               "NAME whole (`--keep saxpy.cu` gives `saxpy.cu.o`, as IDRIS names it), else "
               "`cell.o` or the file's `STEM.o`; a later cell links it with `--options "
               "\"saxpy.cu.o\"` (relinked when the object changes)")
    keep: str | None = flag("-k", "--keep", group="compile", parse=str, metavar="NAME",
                            help="also save the source under NAME",
                            readme="also save the source under NAME")
    force: bool | None = flag("--force", group="compile", help="rebuild even if the build is cached",
                              readme="rebuild even when the build is cached")
    compile_timeout: float | None = flag(
        "--compile-timeout", group="compile", parse=seconds, metavar="SECONDS",
        setting="compile_timeout", env="IDRRUN_COMPILE_TIMEOUT",
        help="stop the compiler after this many seconds (default 120)",
        readme="stop the compiler after SECONDS seconds (default 120, from config; see "
               "[Limits](#limits-and-protection-against-hostile-programs))")
    program_args: tuple[str, ...] | None = flag(
        "--cliopts", parse=words, word_list=True, metavar='"ARGS"', run_only=True,
        help='program arguments, e.g. --cliopts "100 \'a b\'"',
        readme="program arguments (shell quoting: `--cliopts \"1 'two words'\"`)")
    gpus: int | None = flag("-g", "--gpus", parse=positive_int, metavar="N", setting="gpus",
                            run_only=True, help="GPUs to ask the launcher for",
                            readme="GPUs to ask the launcher (srun) for; not asked from a cluster "
                                   "without GPUs (the cell says so)")
    nodes: int | None = flag("-N", "--nodes", parse=positive_int, metavar="N", setting="nodes",
                             run_only=True, help="nodes to spread the tasks over (srun --nodes)",
                             readme="nodes to spread the tasks over (srun `--nodes`)")
    get_files: tuple[str, ...] | None = flag(
        "--get", parse=str, many=True, metavar="FILE", run_only=True,
        help="files the program writes; listed after the run, missing ones reported",
        readme="files the program should write; reported after the run")
    show_time: bool | None = flag("--notime", const=False, help="do not show timings",
                                  readme="no timings")
    profile: str | None = flag(
        "--profile", const="auto", run_only=True, graded_line=True,
        help="show where the GPU time went: Nsight Systems when installed, else the built-in "
             "CUPTI tracer; a summary and a timeline follow the output",
        variants=((("--profiler",), {"parse": str, "choices": _profilers,
                                      "metavar": "auto|nsys|builtin",
                                      "help": "which profiler --profile uses (implies --profile)"}),),
        readme="show where the GPU time went: Nsight Systems when `nsys` is installed (or "
               "configured in `[profiler]`), else a built-in CUPTI tracer; a PGI_ACC_TIME-like "
               "summary and a timeline picture follow the output, and the report (`.nsys-rep` or "
               "`trace.jsonl`) stays in `idrrun-profile/` (see docs/profiling.md)")
    timeout: float | None = flag(
        "--timeout", parse=seconds, metavar="SECONDS", setting="timeout", env="IDRRUN_TIMEOUT",
        run_only=True,
        help="kill the program after this many seconds (default 300, or the exercise's, "
             "which may be a multiple of its solution's time here: this replaces it)",
        readme="kill the program after SECONDS seconds (default 300, from config; a `--check`: "
               "the exercise's limit, which may be a multiple of its solution's time here, and "
               "`--timeout` lets the program run past it)")
    raise_on_failure: bool | None = flag("--no-raise", const=False,
                                         help="a failure is reported but does not fail the cell",
                                         readme="report a failure without failing the cell")
    stdin: Path | None = flag("--stdin", parse=Path, metavar="FILE", to="limits.stdin",
                              run_only=True, readme=_LIMITS,
                              help="standard input for the program (default: none, EOF at once)")
    memory: int | None = flag("--memory", parse=size, metavar="SIZE", to="limits.memory",
                              setting="limits.memory", run_only=True, readme=_LIMITS,
                              help="memory limit, e.g. 4GiB ('none': no limit; default: none, "
                                   "idrrun grade: 3/4 of the machine's memory shared by its jobs)")
    stack: int | None = flag("--stack", parse=size, metavar="SIZE", to="limits.stack",
                             setting="limits.stack", run_only=True, readme=_LIMITS,
                             help="stack size of the program, e.g. 4GiB ('unlimited': as `ulimit -s "
                                  "unlimited`; default 1GiB)")
    tasks: int | None = flag("--tasks", parse=tasks, metavar="N", to="limits.tasks",
                             setting="limits.tasks", run_only=True, readme=_LIMITS,
                             help="most processes and threads at once (0: no limit)")
    file_size: int | None = flag("--file-size", parse=size, metavar="SIZE", to="limits.file_size",
                                 setting="limits.file_size", run_only=True, readme=_LIMITS,
                                 help="largest file the program may write, e.g. 1GiB")
    max_output: int | None = flag("--max-output", parse=output_cap, metavar="SIZE",
                                  setting="max_output", readme=_LIMITS,
                                  help="output kept and shown, e.g. 1MiB")
    sandbox: bool | None = flag("--sandbox", parse=on_off, metavar="on|off", setting="sandbox.mode",
                                help="compile and run in a sandbox that sees only the system folders "
                                     "and this folder (default: off; always on in idrrun grade)",
                                readme="compile and run in a sandbox that sees only the system "
                                       "folders and this folder; default off, always on in "
                                       "`idrrun grade` (see "
                                       "[Grading](#grading-a-verdict-a-student-cannot-buy))")
    check: str | None = flag("--check", "--exercise", group="check", parse=str, metavar="NAME",
                             help="check the result against the exercise NAME (see examples/)",
                             readme="check the result against exercise NAME (see `examples/README.md`)")
    # %idrrunfile and `idrrun run`: the positional FILE (not a flag).
    file: str | None = None

    def given(self) -> dict[str, Any]:
        """{field: value} of what the line set."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


@functools.cache  # the fields of a class: read four times per cell
def specs() -> tuple[tuple[str, FlagSpec], ...]:
    """(Options field, its FlagSpec) of every flag, in declaration order."""
    return tuple((f.name, f.metadata["flag"]) for f in dataclasses.fields(Options)
                 if "flag" in f.metadata)


def _argparse_kwargs(spec: FlagSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    parse = overrides.get("parse", spec.parse)
    help_text = overrides.get("help", spec.help)
    kw: dict[str, Any] = {"help": help_text, "default": None}
    if parse is None:
        kw.update(action="store_const", const=overrides.get("const", spec.const))
        return kw
    kw["type"] = parse
    choices = overrides.get("choices", spec.choices)
    if choices is not None:
        kw["choices"] = tuple(choices())
    metavar = overrides.get("metavar", spec.metavar)
    if metavar is not None:
        kw["metavar"] = metavar
    if spec.many:
        kw["nargs"] = "+"
    return kw


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare every build-and-run option; the magics and the CLI all call this."""
    groups: dict[str, Any] = {}
    for name, spec in specs():
        if spec.group not in groups:
            groups[spec.group] = parser.add_argument_group(spec.group)
        group = groups[spec.group]
        group.add_argument(*spec.names, dest=name, **_argparse_kwargs(spec, {}))
        for names, overrides in spec.variants:
            group.add_argument(*names, dest=name, **_argparse_kwargs(spec, overrides))


def _word_list_flags() -> tuple[str, ...]:
    return tuple(n for _, spec in specs() if spec.word_list for n in spec.names)


def glue_word_lists(tokens: Sequence[str]) -> list[str]:
    """["--options", "-O3"] -> ["--options=-O3"], so a value may start with a dash."""
    word_lists = _word_list_flags()
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in word_lists and i + 1 < len(tokens):
            out.append(f"{token}={tokens[i + 1]}")
            i += 2
        else:
            out.append(token)
            i += 1
    return out


def from_namespace(ns: argparse.Namespace) -> Options:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Options):
        value = getattr(ns, f.name, None)
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return Options(**values)


def make_parser(prog: str, with_file: bool, epilog: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, add_help=False, allow_abbrev=False, epilog=epilog,
                     description="Compile and run C/C++/Fortran/CUDA code with OpenACC.")
    parser.add_argument("-h", "--help", action=_AskForHelp)
    add_arguments(parser)
    if with_file:
        parser.add_argument("file", metavar="FILE", help="the source file")
    return parser


def parse_line(line: str, prog: str = "%%idrrun", with_file: bool = False,
               show_help: bool = True) -> Options | None:
    """Parse a magic line. None when --help was asked (the help has been printed on stdout);
    with show_help=False, nothing is ever printed: a line asking for help raises UsageError."""
    try:
        tokens = shlex.split(line, comments=False)
    except ValueError as exc:
        raise UsageError(f"{prog}: cannot read the line: {exc}") from None
    return parse_tokens(tokens, prog=prog, with_file=with_file, show_help=show_help)


_parsers: dict[tuple[str, bool, tuple[str, ...]], argparse.ArgumentParser] = {}


def _parser(prog: str, with_file: bool) -> argparse.ArgumentParser:
    """make_parser, kept per prog and set of family names (a family registered later makes a
    new one): building it costs more than parsing a line."""
    key = (prog, with_file, registry.names())
    if key not in _parsers:
        _parsers[key] = make_parser(prog, with_file)
    return _parsers[key]


# The Options of the lines already read, by (tokens, prog, with_file, family names): a line's
# Options depend on nothing else (its parser's defaults are the specs'), and a notebook runs the
# same few lines again and again (argparse: ~0.1 ms a cell). A line that asks for the help, or
# is wrong, is read again each time: it prints, or raises.
_read: dict[tuple[tuple[str, ...], str, bool, tuple[str, ...]], Options] = {}
_READ_KEPT = 256


def parse_tokens(tokens: Sequence[str], prog: str, with_file: bool,
                 show_help: bool = True) -> Options | None:
    key = (tuple(tokens), prog, with_file, registry.names())
    known = _read.get(key)
    if known is not None:
        return known
    parser = _parser(prog, with_file)
    glued = glue_word_lists(tokens)
    check_one_dash(parser, glued)
    try:
        ns = parser.parse_args(glued)
    except _HelpAsked:
        _help_asked(parser, show_help)
        return None
    opts = from_namespace(ns)
    if len(_read) >= _READ_KEPT:
        _read.clear()
    _read[key] = opts
    return opts


def _help_asked(parser: argparse.ArgumentParser, show_help: bool) -> None:
    if not show_help:
        raise UsageError(f"{parser.prog}: the line asks for the help (-h/--help), not for a run")
    sys.stdout.write(parser.format_help())


def parse_files(tokens: Sequence[str], prog: str,
                epilog: str | None = None) -> tuple[Options, tuple[str, ...]] | None:
    """`idrrun run [flags] FILE...`: the flags, and every file (built and run in turn, with the
    same flags: one start-up of idrrun for a whole suite of small programs). epilog: what its
    --help says after the flags (the exit codes)."""
    parser = files_parser(prog, epilog)
    glued = glue_word_lists(tokens)
    check_one_dash(parser, glued)
    try:
        ns = parser.parse_args(glued)
    except _HelpAsked:
        _help_asked(parser, True)
        return None
    return from_namespace(ns), tuple(ns.files)


def files_parser(prog: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of `idrrun run [flags] FILE...` (kept, as _parser keeps the magic's)."""
    key = (prog, True, ("files",) + registry.names())
    if key not in _parsers:
        parser = make_parser(prog, with_file=False, epilog=epilog)
        parser.add_argument("files", nargs="+", metavar="FILE", help="the source files")
        _parsers[key] = parser
    return _parsers[key]


def dash_hint(tokens: Sequence[str], form: str) -> str:
    """For a usage error: when a word before any "--" that reads as an option names a file
    ("-j.c"), how to name it instead (`form`: the command's shape, e.g. "idrrun run [flags]")."""
    words = list(tokens)
    before = words[:words.index("--")] if "--" in words else words
    files = [w for w in before if w.startswith("-") and os.path.lexists(w)]
    return (f"\n  {files[0]} is a file: names that start with '-' go after '--' "
            f"({form} -- {files[0]})") if files else ""


def help_text(prog: str, with_file: bool) -> str:
    return make_parser(prog, with_file).format_help()
