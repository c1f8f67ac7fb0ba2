"""Follow one `idrrun run --profile` through pipeline.execute: which files of idrrun/ it enters,
and how often it re-enters profile/stages.py (issue 35: fewer files than 19, the profile
session entered at most twice).

    PYTHONPATH=$PWD python benchmarks/follow_execute.py [--profiler auto|nsys|builtin] [--list]

A small C program (gcc; no GPU needed: nsys, when installed, or the built-in tracer, injected,
finds no GPU work, or the profile says why it could not be taken), compiled into a fresh cache so that the compile
is followed too. Python's tracer (sys.settrace, every thread) records each call while
pipeline.execute is on the main thread's stack: the files of idrrun/ whose functions were
called, the files pipeline.py calls into itself (what a reader following execute meets), and
the calls into profile/stages.py from a function of another file (an entry from outside;
calls inside session.py are its own business).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = str(ROOT / "idrrun") + os.sep
SESSION = str(ROOT / "idrrun" / "profile" / "session.py")
PIPELINE = str(ROOT / "idrrun" / "pipeline.py")
PROGRAM = '#include <stdio.h>\nint main(void) { printf("hello\\n"); return 0; }\n'


class Follower:
    """The calls made while pipeline.execute runs, by file, and the entries into SESSION."""

    def __init__(self, execute_code: Any) -> None:
        self.execute_code = execute_code
        self.depth = 0  # execute frames on the stack (it does not recurse: 0 or 1)
        self.files: Counter[str] = Counter()
        self.entries: list[str] = []  # "caller file:function -> session function"
        self.direct: Counter[str] = Counter()  # the files pipeline.py itself calls into
        self.functions: dict[str, Counter[str]] = {}  # file -> its functions called

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        if frame.f_code is self.execute_code:
            self.depth += 1
            return self.leave
        if not self.depth:
            return None
        name = frame.f_code.co_filename
        if name.startswith(PACKAGE):
            short = name[len(PACKAGE) - len("idrrun/"):]
            self.files[short] += 1
            self.functions.setdefault(short, Counter())[frame.f_code.co_name] += 1
            caller = frame.f_back
            if caller is not None and caller.f_code.co_filename == PIPELINE and name != PIPELINE:
                self.direct[name[len(PACKAGE) - len("idrrun/"):]] += 1
            if name == SESSION and caller is not None and caller.f_code.co_filename != SESSION:
                where = caller.f_code.co_filename.replace(str(ROOT) + os.sep, "")
                self.entries.append(f"{where}:{caller.f_code.co_name} -> {frame.f_code.co_name}")
        return None

    def leave(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            self.depth -= 1
        return self.leave


def follow(profiler: str) -> Follower:
    from idrrun import pipeline
    from idrrun.cli import main

    follower = Follower(pipeline.execute.__code__)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "hello.c").write_text(PROGRAM)
        os.environ["IDRRUN_CACHE_DIR"] = str(folder / "cache")
        os.chdir(folder)
        out = io.StringIO()
        threading.settrace(follower.trace)
        sys.settrace(follower.trace)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = main(["run", f"--profiler={profiler}", "hello.c"])
        finally:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
        if "hello" not in out.getvalue():
            raise SystemExit(f"the program did not run (exit {code}):\n{out.getvalue()}")
    return follower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiler", default="auto", choices=("auto", "nsys", "builtin"))
    parser.add_argument("--list", action="store_true", help="name the files and the entries")
    parser.add_argument("--functions", action="store_true",
                        help="with --list: the functions called in each file")
    args = parser.parse_args()
    followed = follow(args.profiler)
    print(f"files of idrrun/ entered during pipeline.execute: {len(followed.files)}")
    print(f"entries into profile/stages.py from another file: {len(followed.entries)}")
    print(f"files pipeline.py calls into itself: {len(followed.direct)}")
    if args.list:
        for name, calls in sorted(followed.files.items()):
            print(f"  {name}: {calls} calls" + (f", {followed.direct[name]} from pipeline.py"
                                                if name in followed.direct else ""))
            if args.functions:
                print("      " + ", ".join(f"{f} ×{n}" if n > 1 else f
                                           for f, n in followed.functions[name].most_common()))
        for entry in followed.entries:
            print(f"  {entry}")


if __name__ == "__main__":
    main()
