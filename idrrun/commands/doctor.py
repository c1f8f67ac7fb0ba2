"""`idrrun doctor`: what this machine offers for the course."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from .. import doctor
from ..cli import EXIT_OK
from ..request import config
from .common import Parser

def main(tokens: Sequence[str]) -> int:
    p = Parser(prog="idrrun doctor", description="What this machine offers for the course.")
    p.parse_args(list(tokens))
    report = doctor.diagnose(config.load(Path.cwd()))
    print(report)
    if not report.can_compile:
        print("idrrun doctor: no compiler found: nothing can be built here", file=sys.stderr)
        return 1
    return EXIT_OK


