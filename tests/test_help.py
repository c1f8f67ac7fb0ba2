"""Every `--help` of the CLI answers: the commands and their subcommands are found from the
parsers themselves (cli.parser()'s choices, each command's parser() and its subparsers), so a
command or subcommand added later is tested without touching this file. argparse formats a help
string with `%`: a bare `%` in one ("70%)") crashes --help with a ValueError, and only then."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import import_module

import pytest

from conftest import PYTHONPATH
from idrrun import cli


def _subcommands(parser: argparse.ArgumentParser,
                 path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:  # argparse keeps its subparsers there and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, (*path, name))


def every_command() -> list[tuple[str, ...]]:
    top = cli.parser()
    names = next(a.choices for a in top._actions if a.dest == "command")
    assert names is not None
    found: list[tuple[str, ...]] = [()]
    for name in names:
        found += _subcommands(import_module(cli.COMMANDS[name][0]).parser(), (name,))
    return found


COMMANDS = every_command()


def test_the_commands_are_found_from_the_parsers() -> None:
    # The walk reaches the subcommands (course has several): a walk that stopped at the top
    # level would test six helps and miss the ones below.
    assert ("course", "check") in COMMANDS and ("similarity",) in COMMANDS
    assert len(COMMANDS) > len(cli.COMMANDS) + 1


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "idrrun")
def test_every_help_answers(path: tuple[str, ...]) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_RESIDENT="0")
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", *path, "--help"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stdout.strip().startswith("usage:"), r.stdout[:500]
    assert len(r.stdout.strip().splitlines()) > 2
