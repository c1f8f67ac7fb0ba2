"""What the benchmark drivers share: their options, the machine they ran on, timing, the
commands a bare run compares with, and the one way figures reach benchmarks/RESULTS.md.

A driver prints its log, then its figures through `report(title, lines, record=...)`: a title
and a few lines of table (run.sh shows them all last). With --record the figures are kept in
RESULTS.md, newest section first: under run.sh they join that run's one section (a file named
by $BENCH_SECTION, which run.sh inserts at its end); a driver run alone inserts a section of its
own. A section names the date, the command, the machine (CPU, cores, GPU, compilers) and the
commit.

    python3 benchmarks/bench.py machine                 the machine, as a section names it
    python3 benchmarks/bench.py begin FILE --command C  a section's heading, in FILE (run.sh)
    python3 benchmarks/bench.py note TEXT               a line in the run's section (run.sh)
    python3 benchmarks/bench.py insert FILE             FILE's section into RESULTS.md, newest
                                                        first (run.sh; by hand for the section a
                                                        GPU run left in its $OUT)

$BENCH_RESULTS names another file than benchmarks/RESULTS.md (the tests use it).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SCRIPT = Path(sys.argv[0]).resolve()  # the driver, found before any chdir of it
T = TypeVar("T")

# GCC 12's nvptx offloading as the GPU machine has it (../shared/gpu/README.md): PTX for sm_80,
# which the driver compiles for Hopper at start, and the offload libm.
OFFLOAD = ("-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80 -lm")


# ---------------------------------------------------------------------------------------------
# Options


def parser(doc: str | None, *, record: bool = True) -> argparse.ArgumentParser:
    """A driver's parser: its module docstring as the help (laid out as written), and --record
    (record=False for a driver with subcommands: each of them takes it)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if record:
        record_option(p)
    return p


def record_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--record", action="store_true",
                   help="keep the figures in benchmarks/RESULTS.md (run.sh passes it)")


def subcommands(p: argparse.ArgumentParser) -> Callable[[str, str], argparse.ArgumentParser]:
    """add(name, doc) -> the subcommand's parser, with --record; its first line is the summary."""
    subs = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, doc: str) -> argparse.ArgumentParser:
        sub = subs.add_parser(name, help=doc.strip().splitlines()[0], description=doc,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
        record_option(sub)
        return sub

    return add


def program_options(p: argparse.ArgumentParser, args: str | None = "4096 1000",
                    rounds: int | None = 5) -> None:
    """The options of the drivers that time one program: its source, arguments and rounds."""
    p.add_argument("--source", type=Path, default=EXAMPLES / "C" / "data_laplace_solution.c",
                   help="the program (default: the Jacobi solution of data_laplace)")
    p.add_argument("--args", default=args, help=f"its arguments (default: {args!r})")
    if rounds is not None:
        p.add_argument("--rounds", type=int, default=rounds,
                       help=f"interleaved rounds; figures are medians (default {rounds})")


# ---------------------------------------------------------------------------------------------
# The machine


def _first_line(argv: Sequence[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stdout.strip().splitlines() or [""])[0] if r.returncode == 0 else ""


def gpu_name() -> str:
    """The first GPU's name and driver, as nvidia-smi says; "" without one."""
    return _first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])


def has_offload() -> bool:
    """Whether gcc can build for the GPU: its nvptx mkoffload is there (gcc -v alone says
    nvptx-none even where the offload compiler is not installed)."""
    name = _first_line(["gcc", "-print-prog-name=accel/nvptx-none/mkoffload"])
    return bool(name) and os.access(name, os.X_OK)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return re.sub(r"\s+", " ", line.split(":", 1)[1]).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    head = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    if not head:
        return ""
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return head + (" with uncommitted changes" if dirty else "")


def machine() -> str:
    """One paragraph: CPU and cores, GPU, compilers, Python, kernel, load, commit."""
    cores = os.cpu_count() or 0
    used = len(os.sched_getaffinity(0))
    gpu = gpu_name()
    compilers = [v for v in (_first_line([c, "--version"]) for c in ("gcc", "gfortran", "nvc")) if v]
    parts = [f"{_cpu_model()}, {cores} cores" + (f" ({used} used)" if used != cores else ""),
             f"GPU {gpu}" if gpu else "no GPU",
             ", ".join(compilers), "gcc offloads to nvptx" if has_offload() else "",
             f"Python {platform.python_version()}, Linux {platform.release()}",
             f"load {os.getloadavg()[0]:.1f}"]
    commit = _commit()
    if commit:
        parts.append(f"commit {commit}")
    return "; ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------
# Figures and RESULTS.md


def results_file() -> Path:
    return Path(os.environ.get("BENCH_RESULTS") or ROOT / "benchmarks" / "RESULTS.md")


def heading(command: str) -> str:
    return (f"## {time.strftime('%Y-%m-%d %H:%M')} — `{command}`\n\n"
            f"Machine: {machine()}.\n\n")


def block(title: str, lines: Iterable[str], command: str) -> str:
    body = "\n".join(lines)
    return f"**{title}** (`{command}`):\n```\n{body}\n```\n\n"


def this_command() -> str:
    """How this driver was started, as a reader would type it (without --record)."""
    shown = SCRIPT.relative_to(ROOT) if SCRIPT.is_relative_to(ROOT) else SCRIPT
    return shlex.join(["python3", str(shown), *(a for a in sys.argv[1:] if a != "--record")])


def report(title: str, lines: Sequence[str], *, record: bool) -> None:
    """The driver's figures: printed last; with `record`, kept in RESULTS.md (the run's section
    under run.sh, else a section of their own). Every driver's figures come through here."""
    print(f"\n== {title}")
    for line in lines:
        print(line)
    if not record:
        return
    text = block(title, lines, this_command())
    section = os.environ.get("BENCH_SECTION")
    if section:
        with open(section, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        insert(heading(this_command()) + text)


def insert(section: str, results: Path | None = None) -> Path:
    """`section` into RESULTS.md before its newest section (the file runs newest first)."""
    path = results or results_file()
    text = path.read_text(encoding="utf-8") if path.exists() else "# Measured figures\n\n"
    found = re.search(r"^## ", text, re.MULTILINE)
    at = found.start() if found else len(text)
    path.write_text(text[:at] + section.rstrip("\n") + "\n\n" + text[at:], encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Timing


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def timed(fn: Callable[[], T], rounds: int) -> tuple[float, T]:
    """The median seconds of `rounds` (at least one) calls, and the last call's value."""
    times: list[float] = []
    for _ in range(max(rounds, 1)):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return median(times), result


def wall(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
         check: bool = False) -> float:
    """Seconds one command takes, its output thrown away."""
    start = time.perf_counter()
    r = subprocess.run(list(argv), env=None if env is None else dict(env), cwd=cwd, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if check and r.returncode != 0:
        sys.exit(f"{shlex.join(argv)}: exit {r.returncode}")
    return took


def spread(values: Sequence[float], scale: float = 1.0, digits: int = 2) -> str:
    return ", ".join(f"{scale * v:.{digits}f}" for v in values)


# ---------------------------------------------------------------------------------------------
# What a bare run compares with


def idrrun_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child `python -m idrrun`: this checkout first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *rest])
    env.update(extra)
    return env


@dataclass(frozen=True)
class Compile:
    """The compiler command `idrrun run -a` prints (`$ gcc ... -o saxpy saxpy.c -lm`: the
    student's names for the build folder's `prog` and `source.c`): what a bare compile must run
    to compare like with like, on any machine."""

    argv: tuple[str, ...]
    source: str = ""  # the name of the file it was made for, as the command shows it

    def of(self, source: Path, exe: Path) -> list[str]:
        out: list[str] = []
        for i, arg in enumerate(self.argv):
            before = self.argv[i - 1] if i else ""
            if before == "-o":
                out.append(str(exe))
            elif before == "-I":
                out.append(str(source.parent))
            elif arg in (source.name, self.source) or re.fullmatch(r"source\.\w+", arg):
                out.append(str(source))
            else:
                out.append(arg)
        return out


def compile_command(source: Path, env: Mapping[str, str], *flags: str) -> Compile:
    """idrrun's compile command for `source` (and `flags` of `idrrun run`) in this environment."""
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as folder:
        copy = Path(folder) / source.name
        shutil.copyfile(source, copy)
        r = subprocess.run([sys.executable, "-m", "idrrun", "run", "-a", "-n", "--force", "--notime",
                            *flags, copy.name], cwd=folder, env=idrrun_env(env), capture_output=True,
                           text=True, check=False)
    line = re.search(r"^\$ (.*)$", re.sub(r"\x1b\[[0-9;]*m", "", r.stdout), re.MULTILINE)
    if r.returncode != 0 or line is None:
        sys.exit(f"no compile command from idrrun for {source} (exit {r.returncode}):\n"
                 f"{(r.stdout + r.stderr)[-2000:]}")
    return Compile(tuple(shlex.split(line.group(1))), source.name)


def build_acc(source: Path, exe: Path, *flags: str, gpu: bool = True) -> None:
    """`source` with gcc's OpenACC, for the GPU (nvptx) or the host: a student's build."""
    offload = OFFLOAD if gpu else ("-foffload=disable",)
    compiler = "gfortran" if source.suffix.lower() in (".f90", ".f") else "gcc"
    r = subprocess.run([compiler, "-O2", "-fopenacc", *offload, *flags, "-o", str(exe), str(source),
                        "-lm"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"build of {source} failed:\n{r.stderr[-2000:]}")


def require_gpu(driver: str) -> str:
    """The GPU's name, or the driver ends: its figures would measure nothing without one."""
    name = gpu_name()
    if not name:
        sys.exit(f"{driver}: no GPU here (nvidia-smi finds none): run it on the GPU machine "
                 "(source .gpu/activate.sh && bash benchmarks/run.sh ...)")
    return name


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_subparsers(dest="what", required=True, metavar="COMMAND").add_parser
    add("machine", help="the machine, as a section names it")
    begin = add("begin", help="a section's heading, in FILE (run.sh)")
    begin.add_argument("file", type=Path)
    begin.add_argument("--command", dest="line", required=True, help="the command the section is of")
    note = add("note", help="a line in the run's section ($BENCH_SECTION), else printed")
    note.add_argument("text", nargs="+")
    put = add("insert", help="FILE's section into RESULTS.md, newest first")
    put.add_argument("file", type=Path)
    args = p.parse_args(argv)
    if args.what == "machine":
        print(machine())
    elif args.what == "begin":
        args.file.write_text(heading(args.line), encoding="utf-8")
    elif args.what == "note":
        text = " ".join(args.text)
        print(text)
        if os.environ.get("BENCH_SECTION"):
            with open(os.environ["BENCH_SECTION"], "a", encoding="utf-8") as f:
                f.write(text + "\n\n")
    else:
        print(f"section added to {insert(args.file.read_text(encoding='utf-8'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
