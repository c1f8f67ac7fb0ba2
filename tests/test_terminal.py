"""A real `ipython` in a terminal, driven through pexpect, runs one %%idrrun cell."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pexpect
import pytest

from conftest import ROOT


@pytest.mark.skipif(not shutil.which("ipython") and not shutil.which(sys.executable), reason="no ipython")
def test_ipython_terminal_runs_a_cell(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="dumb")
    child = pexpect.spawn(sys.executable, ["-m", "IPython", "--simple-prompt", "--no-banner",
                                          "--colors=NoColor", "--ext=idrrun"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=60)
    try:
        child.expect(r"In \[1\]: ")
        child.sendline("%%idrrun --cliopts 6")
        for line in ["#include <stdio.h>", "#include <stdlib.h>",
                     "int main(int argc, char **argv) {",
                     '  printf("terminal says %d\\n", 7 * atoi(argv[1]));', "  return 0;", "}", "", ""]:
            child.expect_exact("...: ")
            child.sendline(line)
        child.expect("terminal says 42")
        child.expect(r"exit 0")
        child.expect(r"In \[2\]: ")
        child.sendline("%%idrrun --nosuchflag")
        child.sendline("")
        child.sendline("")
        child.expect("UsageError: %%idrrun: unrecognized arguments: --nosuchflag")
        child.expect(r"In \[3\]: ")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
