"""`idrrun doctor`: what this machine offers for the course."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from .. import doctor
from ..cli import EXIT_FAILED, EXIT_OK
from ..request import config
from .common import Parser, print_json


def parser() -> Parser:
    p = Parser(prog="idrrun doctor", description="What this machine offers for the course: "
                                                 "compilers, GPU offloading, profilers, MPI, SLURM, "
                                                 "protections, config files, exercises.",
               epilog="Exit codes: 0 something can compile, 1 nothing can, 2 usage or "
                      "configuration error.")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    return p


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_tokens(tokens)
    workdir = Path.cwd()
    report = doctor.diagnose(config.load(workdir), workdir)
    if args.json:
        print_json(report.as_dict())
    else:
        print(report, flush=True)
    if not report.can_compile:
        print("idrrun doctor: no compiler found: nothing can be built here", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
