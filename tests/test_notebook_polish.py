"""What a notebook user sees, in a real kernel (and a real `ipython` terminal): `%%idrrun --help`
alone in a cell, `%idrrun --help`, diagnostics named after the `In [N]` on screen (a cached
build's too), the doctor as text, a failed check without an empty `command:` line, what is said
of the machine said once per kernel under a header that agrees with it."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from conftest import ROOT, Kernel, has_gpu
from idrrun import toolchains
from idrrun.model import Settings

START_C = (ROOT / "examples" / "C" / "intro_saxpy_exercise.c").read_text()


def shown(r: Any) -> str:
    """Everything a cell showed: streams, the text of its displays, its error."""
    return r.stdout + r.stderr + "".join(d.get("text/plain", "") for d in r.displays) + r.error_text


def test_help_alone_in_a_cell_and_as_a_line_magic(kernel: Kernel) -> None:
    for code in ("%%idrrun --help", "%%idrrun --help\n", "%%idrrun -h\n\n  \n", "%idrrun --help"):
        r = kernel.run(code)
        assert r.status == "ok", (code, r.error_text, r.stderr)
        assert "usage: %%idrrun" in r.stdout and "--check NAME" in r.stdout, code
    r = kernel.run("%%idrrun -a")
    assert r.status == "error" and "the cell has no code below the %%idrrun line" in r.stderr
    assert "Traceback" not in r.stderr
    r = kernel.run("%idrrun -a")
    assert r.status == "error" and "%idrrun runs no code" in r.stderr
    r = kernel.run("%idrrun --bogus")
    assert r.status == "error" and "unrecognized arguments: --bogus" in r.stderr


def _execute(kernel: Kernel, code: str) -> tuple[int, str]:
    """The In [N] the front end shows for the cell (execute_input), and the cell's stdout."""
    r = kernel.run(code)
    assert r.execution_count is not None and r.reply["execution_count"] == r.execution_count
    return r.execution_count, r.stdout


def test_diagnostics_name_the_cell_as_the_user_sees_it(kernel: Kernel) -> None:
    kernel.run("x = 1")  # whatever came before
    for _ in range(2):
        number, out = _execute(kernel, "%%idrrun -l c\nint main(void) { return y; }\n")
        assert re.search(rf"^cell\[{number}\]:2:\d+: error", out, re.MULTILINE), (number, out)


def test_a_cached_build_names_the_cell_that_runs_it(kernel: Kernel) -> None:
    """The compiler's warning, replayed from the cache, names this cell's In [N], not the one
    of the cell that first built it."""
    cell = "%%idrrun -l c --options -Wall\nint main(void) {\n    int unused;\n    return 0;\n}\n"
    first, out = _execute(kernel, cell)
    assert re.search(rf"^cell\[{first}\]:3:\d+: warning: unused variable", out, re.MULTILINE), out
    kernel.run("x = 2")
    again, out = _execute(kernel, cell)
    assert "build cached" in out and again > first
    assert re.search(rf"^cell\[{again}\]:3:\d+: warning: unused variable", out, re.MULTILINE), out
    assert f"cell[{first}]" not in out


ACC_CELL = ("%%idrrun -a{flags}\n#include <stdio.h>\nint main(void) {{\n    int s = 0;\n"
            "    #pragma acc parallel loop reduction(+:s)\n    for (int i = 0; i < {n}; i++) s += i;\n"
            "    printf(\"%d\\n\", s);\n    return 0;\n}}\n")


def _notes(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("note: ")]


def test_what_is_said_of_the_machine_is_said_once_per_kernel(fresh_kernel: Kernel) -> None:
    """A laptop without a GPU: "no GPU found: building for the host ... Add --accopts cc80" in
    the first OpenACC cell, not in every cell after it; notes on what a line asks, every time;
    a header that says what the notes say."""
    if has_gpu():
        pytest.skip("the notes of a machine without a GPU")
    first = fresh_kernel.run(ACC_CELL.format(flags="", n=10))
    assert first.status == "ok", first.error_text
    said = _notes(first.stdout)
    assert any("no GPU found: building for the host" in n or "cannot offload" in n
               for n in said), first.stdout
    assert "OpenACC on the host (no GPU offload)" in first.stdout
    second = fresh_kernel.run(ACC_CELL.format(flags="", n=20))
    assert second.status == "ok" and "190" in second.stdout, second.error_text
    assert not set(said) & set(_notes(second.stdout)), second.stdout
    assert "OpenACC on the host (no GPU offload)" in second.stdout
    for n in (30, 40):  # about the line: said each time it is written
        r = fresh_kernel.run(ACC_CELL.format(flags=" --accopts pinned", n=n))
        assert _notes(r.stdout) == ["note: gcc ignores these accopts (nvhpc options without a gcc "
                                    "equivalent): pinned"], r.stdout
    if not toolchains.probe(Settings()).offload:
        return
    # Built for a GPU on a machine without one: the header and the note agree, once.
    for n, note in ((50, True), (60, False)):
        r = fresh_kernel.run(ACC_CELL.format(flags=" --accopts cc80", n=n))
        assert r.status == "ok", r.error_text
        assert "OpenACC built for a GPU, none found here" in r.stdout
        assert ("note: no GPU found: built for a GPU as asked; here the program falls back to the "
                "host" in _notes(r.stdout)) is note, r.stdout


def test_doctor_magic_is_readable_as_text(kernel: Kernel) -> None:
    r = kernel.run("%idrrun_doctor")
    assert r.status == "ok", r.error_text
    [data] = [d for d in r.displays if "text/html" in d]
    text = data["text/plain"]
    assert "Report(" not in text and "DoctorLine(" not in text
    assert re.search(r"^compiler gcc c\s+OK\s+/", text, re.MULTILINE), text
    assert re.search(r"^exercises\s+OK\s+\d+ in ", text, re.MULTILINE), text


def test_a_failed_check_has_no_empty_command_line(kernel: Kernel) -> None:
    r = kernel.run("%%idrrun -a --check intro_saxpy\n" + START_C)
    assert r.status == "error"
    assert "check failed:" in r.error_text and "hint:" in r.error_text
    assert not re.search(r"command:\s*$", r.error_text, re.MULTILINE), r.error_text
    assert "command:" not in r.error_text
    # a failure with a command still shows it
    r = kernel.run("%%idrrun -l c\nint main(void) { return y; }\n")
    # with the cell's name, as the compiler's messages name it (not the build's source.c)
    assert re.search(r"command: gcc .*-o cell\d+ 'cell\[\d+\]'", r.error_text), r.error_text
    assert "source.c" not in r.error_text and " prog" not in r.error_text


def test_ipython_terminal_help_alone_and_cell_numbers(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="dumb")
    child = pexpect.spawn(sys.executable, ["-m", "IPython", "--simple-prompt", "--no-banner",
                                          "--colors=NoColor", "--ext=idrrun",
                                          "--HistoryManager.enabled=False"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=60)
    try:
        child.expect(r"In \[1\]: ")
        # The simple prompt ends a cell magic's cell with two blank lines.
        child.sendline("%%idrrun --help")
        child.sendline("")
        child.sendline("")
        child.expect("usage: %%idrrun")
        child.expect(r"In \[(\d+)\]: ")
        number = int(child.match.group(1))
        child.sendline("%%idrrun -l c")
        child.expect_exact("...: ")
        child.sendline("int main(void) { return z; }")
        child.expect_exact("...: ")
        child.sendline("")
        child.sendline("")
        child.expect(r"cell\[(\d+)\]:2:\d+: error")
        assert int(child.match.group(1)) == number
        child.expect(r"In \[\d+\]: ")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_no_color_in_the_ipython_terminal(tmp_path: Path) -> None:
    """On a colour terminal the magic paints its own lines (dim header), unless NO_COLOR."""
    for no_color, painted in (("", True), ("1", False)):
        env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm", NO_COLOR=no_color)
        child = pexpect.spawn(sys.executable, ["-m", "IPython", "--simple-prompt", "--no-banner",
                                              "--colors=NoColor", "--ext=idrrun",
                                              "--HistoryManager.enabled=False"],
                              cwd=str(tmp_path), env=env, encoding="utf-8", timeout=60)
        try:
            child.expect(r"In \[1\]: ")
            for line in ("%%idrrun -l c", 'int main(void) { return 0; }', "", ""):
                child.sendline(line)
            child.expect(r"In \[2\]: ")
            seen = child.before
            assert "exit 0" in seen
            child.sendline("exit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert ("\x1b[2midrrun: " in seen) is painted, repr(seen[:400])
