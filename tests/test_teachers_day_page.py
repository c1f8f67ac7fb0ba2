"""docs/teachers-day.md cannot drift from the code in what it names: every `idrrun` command the
page gives (its code blocks and its inline commands) is accepted by that command's own parser,
as typed there, and every file of the repository it names exists. (The page's commands run in
its order against the test cluster and hub: tests/test_teachers_day_run.py and
tests/test_classday.py.)"""

from __future__ import annotations

import re
import shlex
from importlib import import_module
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun.cli import COMMANDS
from idrrun.errors import UsageError

PAGE = ROOT / "docs" / "teachers-day.md"


def commands(text: str) -> list[str]:
    """The idrrun command lines of the page: each code block's lines (a trailing backslash
    joins the next), and each inline `idrrun ...` of its prose."""
    found = []
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if argv(line):
                found.append(line.strip())
    # Inline: a command is typed with its arguments ("`idrrun classroom fetch intro_pi`");
    # "`idrrun grade`" or "`idrrun classroom submit`" in a sentence names a command, no more.
    prose = re.sub(r"```\n.*?```", "", text, flags=re.S)
    # (Each code span, the backticks paired from the first: the text between two spans is prose.)
    for inline in re.findall(r"`([^`]+)`", prose):
        line = " ".join(inline.split())
        if re.search(r"\bidrrun ", line) and len(argv(line) or ()) >= 3:
            found.append(line)
    return found


def argv(line: str) -> list[str] | None:
    """The arguments after `idrrun`, environment assignments and a `PATH=... ` prefix left out;
    placeholders (LOGIN, CHECKOUT, FILE...) kept as they are: the parser takes them as values."""
    words = shlex.split(line)
    # The command itself: the part of a `A && B` that runs idrrun, from the idrrun on.
    start = next((i for i, w in enumerate(words) if w == "idrrun" or (w.endswith("/idrrun") and "=" not in w)), None)
    if start is None:
        return None  # idrrun in a path only (IDRRUN_HUB_VENV=/opt/idrrun ...): another program
    words = words[start:]
    for stop in ("&&", ";", "|"):
        if stop in words:
            words = words[:words.index(stop)]
    return words[1:]


def test_the_page_has_the_days_commands() -> None:
    lines = commands(PAGE.read_text())
    verbs = {tuple((argv(line) or [])[:2]) for line in lines}
    for want in (("classroom", "release"), ("classroom", "serve"), ("classroom", "status"),
                 ("classroom", "collect"), ("classroom", "return"), ("classroom", "submit"),
                 ("classroom", "fetch"), ("classroom", "feedback"), ("gradebook",)):
        assert any(v[:len(want)] == want for v in verbs), (want, sorted(verbs))
    assert any((argv(line) or [])[:1] == ["grade"] for line in lines)


@pytest.mark.parametrize("line", commands(PAGE.read_text()))
def test_each_idrrun_command_of_the_page_is_accepted_by_its_parser(line: str) -> None:
    words = argv(line)
    assert words and words[0] in COMMANDS, line
    parser = import_module(COMMANDS[words[0]][0]).parser()
    try:
        parser.parse_args(words[1:])
    except (UsageError, SystemExit) as exc:
        pytest.fail(f"{line}\n  refused by idrrun {words[0]}'s parser: {exc}")


def test_every_file_of_the_repository_it_names_exists() -> None:
    text = PAGE.read_text()
    named = set(re.findall(r"`((?:hub|docs|docker|tests|benchmarks|idrrun|labextension)/[\w./-]+)`", text))
    named |= set(re.findall(r"\b((?:hub|docker)/[\w.-]+\.(?:sh|py))\b", text))
    missing = [n for n in sorted(named) if not (ROOT / n.rstrip(".")).exists()]
    assert named and not missing, missing


def test_a_wrong_flag_on_the_page_would_be_found(tmp_path: Path) -> None:
    """The check can fail: a flag the parser does not know is refused."""
    parser = import_module(COMMANDS["classroom"][0]).parser()
    with pytest.raises((UsageError, SystemExit)):
        parser.parse_args((argv("idrrun classroom collect intro_pi --roster class.csv --into /root/x") or [])[1:])
