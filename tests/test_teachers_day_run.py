"""docs/teachers-day.md as a teacher types it (issue 45.3): the page's commands, taken in the
page's order (its step table, its code blocks, and of its prose the students' `idrrun` commands
and the teacher's `export PATH=...`), each taken by one of RULES: run as written, as root or as
each student, or skipped with the rule's reason. The only changes the test makes to a command
are SUBSTITUTIONS, each a pattern, what replaces it and why: paths of the test's folders, hub
and cluster that the page cannot know. A rule or a substitution that no longer meets a command
of the page fails, and so does a command that no rule takes or a path of the machine that no
substitution replaces: the page cannot drift from the test.

The run itself, on the 3-node SLURM cluster and the hub of tests/test_classday.py (that
module's fixtures: no hub of its own), is test_classday's test_the_teachers_day_as_the_page_says,
through `Day` below. Here, without a cluster: the page's commands and the test's rules meet one
for one; the hub's start command and the settings it gives are the fixture's; scratch copies of
the page with a command changed are caught; and a grader through srun as root with its cache in
root's 0700 home is refused before grading, naming the folder and the fix.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "teachers-day.md"


@dataclass(frozen=True)
class Command:
    """One command of the page, as typed there (a line continued by a backslash joined)."""

    line: str
    where: str  # "table", "block", "prose"; "roster" for the class's CSV block
    offset: int  # where the page has it: the order of the day


CODE = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
TABLE_ROW = re.compile(r"^\|.*\|[ \t]*$", re.M)


def page_commands(text: str) -> list[Command]:
    """The page's commands in its order: every line of its code blocks (the roster's CSV block
    as one "roster"), the commands of its step table (each code span of a row's last cell that
    is a command line: two words or more, not an option alone), and in its prose the students'
    `idrrun ...` commands (three words or more: "`idrrun grade`" names a command in a sentence)
    and the teacher's `export PATH=...`."""
    found: list[Command] = []
    taken: list[tuple[int, int]] = []
    for m in FENCE.finditer(text):
        taken.append(m.span())
        body = m.group(1)
        if body.startswith("submission,"):
            found.append(Command(body, "roster", m.start()))
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip():
                found.append(Command(" ".join(line.split()), "block", m.start()))
    for m in TABLE_ROW.finditer(text):
        if any(a <= m.start() < b for a, b in taken) or re.fullmatch(r"[|\s:-]+", m.group()):
            continue
        taken.append(m.span())
        cell = m.group().strip().strip("|").split(" | ")[-1]
        for span in CODE.findall(cell):
            if len(span.split()) >= 2 and not span.startswith("-"):
                found.append(Command(" ".join(span.split()), "table", m.start()))
    # The prose: the page with its blocks and table blanked out (their backticks would pair
    # with the prose's), the offsets kept.
    prose = list(text)
    for a, b in taken:
        prose[a:b] = " " * (b - a)
    for m in CODE.finditer("".join(prose)):
        line = " ".join(m.group(1).split())
        if (line.startswith("idrrun ") and len(line.split()) >= 3) or line.startswith("export PATH="):
            found.append(Command(line, "prose", m.start()))
    return sorted(found, key=lambda c: c.offset)


# --- what the test does with each command ---------------------------------------------------

TEACHER, STUDENT, PATH, ROSTER, SKIP = "teacher", "student", "path", "roster", "skip"


@dataclass(frozen=True)
class Rule:
    pattern: str  # re.search on the command as the page has it
    role: str  # TEACHER (as root), STUDENT (as each student), PATH, ROSTER, or SKIP
    why: str = ""  # for SKIP: why the test does not run it, and what stands for it


RULES = (
    Rule(r"^submission,login,", ROSTER),
    Rule(r"^useradd -m -U LOGIN$|^passwd LOGIN$", SKIP,
         "the students' accounts: the hub fixture makes them with useradd -m -U (tests/test_hub.py) "
         "and the test's hub logs them in with a password of its own (IDRRUN_HUB_AUTH=dummy), not PAM"),
    Rule(r"^PYTHON=/usr/bin/python3 bash hub/install\.sh /opt/idrrun$", SKIP,
         "the hub's environment: built once per machine (minutes of pip and npm), the tests use the "
         "one it made (IDRRUN_HUB_VENV); tests/test_hub_install.py runs its refusals"),
    Rule(r"^PATH=/opt/idrrun/bin:\$PATH idrrun course init \S+ --students$", TEACHER),
    Rule(r"^/opt/idrrun/bin/idrrun course init /root/course --from CHECKOUT && chmod 700 /root/course$",
         TEACHER),
    Rule(r"^(IDRRUN_\w+=(\"[^\"]*\"|\S+) )+/opt/idrrun/bin/jupyterhub -f hub/jupyterhub_config\.py$", SKIP,
         "the hub: the fixture starts it with this program and this file (HUB_START), the "
         "settings the page gives set to the test's (HUB_SETTINGS) beside the test's own (ports, "
         "logins, the exchange's and the boards' folders)"),
    Rule(r"^export PATH=/opt/idrrun/bin:\$PATH$", PATH),
    Rule(r"^idrrun classroom (release|status|collect|return) ", TEACHER),
    Rule(r"^idrrun classroom (list$|(fetch|submit|feedback) )", STUDENT),
    Rule(r"^idrrun classroom submit$", SKIP,
         "a sentence of the Scale section naming the command the benchmark runs, nothing typed"),
    Rule(r"^idrrun classroom serve ", SKIP,
         "the receiver: with the hub it is the hub's service idrrun-exchange, started with the hub "
         "(hub/jupyterhub_config.py), as the page says; the students' commands reach it"),
    Rule(r"^IDRRUN_EXAMPLES=\S+ IDRRUN_CACHE_DIR=\S+ idrrun grade ", TEACHER),
    Rule(r"^idrrun gradebook ", TEACHER),
)

# The hub's start command of the page, with SUBSTITUTIONS made, is the fixture's (tests/test_hub.py
# runs VENV/bin/jupyterhub -f ROOT/hub/jupyterhub_config.py), and the settings the page gives
# are given by the fixture too, each to the test's value.
HUB_START = ("{venv}/bin/jupyterhub", "-f", "hub/jupyterhub_config.py")
HUB_SETTINGS = ("IDRRUN_HUB_VENV", "IDRRUN_EXAMPLES")


@dataclass(frozen=True)
class Substitution:
    pattern: str  # re.sub on the command line
    replacement: str  # str.format'ed with Day.values()
    why: str


SUBSTITUTIONS = (
    Substitution(r"/opt/idrrun/grader-cache", "{shared}/grader-cache",
                 "the grader's cache on the cluster's shared file system, in the test's folder "
                 "(not in the machine's hub environment, which other tests use)"),
    Substitution(r"/opt/idrrun/course", "{top}/students-course",
                 "the students' copy, made as the page says in the test's folder (the servers of "
                 "the fixture's hub have their own, IDRRUN_EXAMPLES)"),
    Substitution(r"/opt/idrrun\b", "{venv}", "the hub's environment of the tests (IDRRUN_HUB_VENV)"),
    Substitution(r"/root\b", "{home}",
                 "root's home: a folder of root's, 0700, the HOME of the teacher's commands (the "
                 "machine's /root is left alone)"),
    Substitution(r"\bCHECKOUT\b", "{checkout}", "the page's placeholder: this checkout"),
    Substitution(r"--deadline \S+", "--deadline {deadline}",
                 "the deadline: an hour after the test starts (the page's date passes)"),
    Substitution(r"/srv/idrrun/boards", "{boards}", "the boards' folder of the fixture's hub (IDRRUN_HUB_BOARDS)"),
    Substitution(r"^(idrrun classroom (?:release|status|collect|return) \S+)", r"\1 --exchange {exchange}",
                 "the exchange of the fixture's hub (IDRRUN_HUB_EXCHANGE); the page: change the "
                 "folder with --exchange DIR, on every teacher's command"),
)


def rule_for(command: Command) -> Rule:
    matched = [r for r in RULES if re.search(r.pattern, command.line)]
    assert len(matched) == 1, (f"the page's command is taken by {len(matched)} of the test's "
                               f"rules (RULES), not one: {command.line!r}")
    return matched[0]


def substituted(line: str, values: Mapping[str, str], used: dict[str, int] | None = None) -> str:
    """The command as the test runs it: each of SUBSTITUTIONS made, in order (`used` counts
    what each changed)."""
    escaped = {k: v.replace("\\", "\\\\") for k, v in values.items()}  # (re.sub's template)
    for sub in SUBSTITUTIONS:
        line, n = re.subn(sub.pattern, sub.replacement.format(**escaped), line)
        if used is not None:
            used[sub.pattern] = used.get(sub.pattern, 0) + n
    return line


def roster_text(block: str, logins: Sequence[str]) -> str:
    """The page's roster with the test's students: her login, and the submission named by it,
    replaced line by line; the rest (email, name) as the page has it."""
    rows = list(csv.DictReader(io.StringIO(block)))
    assert len(rows) <= len(logins), (rows, logins)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row, login in zip(rows, logins):
        writer.writerow({**row, "submission": login, "login": login})
    return out.getvalue()


# Values of the test's folders for the checks without a cluster.
VALUES = {"top": "/T", "home": "/T/root", "venv": "/V", "shared": "/S", "exchange": "/T/exchange",
          "boards": "/T/boards", "deadline": "2030-01-01T00:00+00:00", "checkout": str(ROOT)}


def stale(text: str) -> list[str]:
    """The rules and substitutions of the test that no command of the page needs any more."""
    commands = page_commands(text)
    out = [f"rule {r.pattern!r}" for r in RULES if not any(re.search(r.pattern, c.line) for c in commands)]
    used: dict[str, int] = {}
    for c in commands:
        if rule_for(c).role in (TEACHER, STUDENT, PATH) or "jupyterhub -f" in c.line:
            substituted(c.line, VALUES, used)
    return out + [f"substitution {s.pattern!r}" for s in SUBSTITUTIONS if not used.get(s.pattern)]


# --- the run --------------------------------------------------------------------------------

Hook = Callable[[str, str], None]  # (the student's login or "root", the command as run)


@dataclass
class Ran:
    command: Command
    line: str  # as run, substituted
    who: str
    result: subprocess.CompletedProcess[str]


@dataclass
class Day:
    """Where the page's commands run: the test's folders, its hub's exchange, its students."""

    top: Path  # the test's folder (every user may pass)
    home: Path  # stands for /root: root's, 0700
    venv: Path
    shared: Path  # a folder of the cluster's shared file system
    exchange: Path
    boards: Path
    deadline: str
    students: Sequence[str]
    student_env: Mapping[str, Mapping[str, str]]  # each one's environment (her hub token...)
    teacher_env: Mapping[str, str]
    before: Mapping[str, Hook] = field(default_factory=dict)  # verb ("submit") -> what precedes it
    ran: list[Ran] = field(default_factory=list)
    skipped: list[tuple[Command, str]] = field(default_factory=list)
    prelude: str = ""  # the teacher's `export PATH=...`, once the page has said it

    def values(self) -> dict[str, str]:
        return {"top": str(self.top), "home": str(self.home), "venv": str(self.venv),
                "shared": str(self.shared), "exchange": str(self.exchange),
                "boards": str(self.boards), "deadline": self.deadline, "checkout": str(ROOT)}

    def run(self, text: str) -> None:
        assert not stale(text), stale(text)
        for command in page_commands(text):
            rule = rule_for(command)
            if rule.role == SKIP:
                self.skipped.append((command, rule.why))
            elif rule.role == ROSTER:
                (self.home / "class.csv").write_text(roster_text(command.line, self.students))
            elif rule.role == PATH:
                self.prelude = substituted(command.line, self.values()) + "\n"
            elif rule.role == TEACHER:
                self.teacher(command)
            else:
                for login in self.students:
                    self.student(command, login)

    def as_run(self, command: Command) -> str:
        """The command with SUBSTITUTIONS made; refused when a path of the machine is left in
        it (the test writes only in its own folders: a path the page gained needs a
        substitution)."""
        line = substituted(command.line, self.values())
        roots = [str(p) for p in (self.top, self.venv, self.shared, self.exchange, self.boards, ROOT)]
        for path in re.findall(r"(?<![\w.$])/[\w./*-]+", line):
            assert any(path == r or path.startswith(r + "/") for r in roots), (
                f"{path}: a path of the machine in the page's command, which the test does not "
                f"replace (SUBSTITUTIONS): {command.line}")
        return line

    def teacher(self, command: Command) -> None:
        line = self.as_run(command)
        self.hook(line, "root")
        r = self.shell(line)
        self.ran.append(Ran(command, line, "root", r))
        assert r.returncode == 0, failed(command, line, "root", r)

    def shell(self, line: str) -> subprocess.CompletedProcess[str]:
        """LINE in the teacher's shell: bash as root, the page's PATH once it has said it, in
        root's home (where class.csv is)."""
        return subprocess.run(["bash", "-euo", "pipefail", "-c", self.prelude + line],
                              cwd=self.home, env=dict(self.teacher_env), capture_output=True,
                              text=True, timeout=300)

    def student(self, command: Command, login: str) -> None:
        line = self.as_run(command)
        self.hook(line, login)
        env = self.student_env[login]
        r = subprocess.run(["runuser", "-u", login, "--", "env", "-i",
                            *(f"{k}={v}" for k, v in env.items()), "bash", "-euo", "pipefail", "-c", line],
                           cwd=env["HOME"], capture_output=True, text=True, timeout=300)
        self.ran.append(Ran(command, line, login, r))
        assert r.returncode == 0, failed(command, line, login, r)

    def hook(self, line: str, who: str) -> None:
        words = shlex.split(line)
        at = next((i for i, w in enumerate(words) if w == "idrrun" or w.endswith("/idrrun")), None)
        verb = " ".join(words[at + 1:at + 3]) if at is not None else ""
        for key, hook in self.before.items():
            if verb == key or verb.split()[:1] == [key]:
                hook(who, line)

    def output(self, pattern: str, who: str = "root") -> str:
        """What the last command run as WHO whose line matches PATTERN printed."""
        for ran in reversed(self.ran):
            if ran.who == who and re.search(pattern, ran.line):
                return ran.result.stdout + ran.result.stderr
        raise AssertionError(f"no command of {who} matching {pattern!r} ran: "
                             f"{[r.line for r in self.ran]}")


def failed(command: Command, line: str, who: str, r: subprocess.CompletedProcess[str]) -> str:
    return (f"docs/teachers-day.md's command, as {who}, failed (exit {r.returncode}):\n"
            f"  on the page: {command.line}\n  run as: {line}\n--- stdout\n{r.stdout[-4000:]}\n"
            f"--- stderr\n{r.stderr[-4000:]}")


def idrrun_argv(line: str) -> list[str]:
    """A command's words from its idrrun on (environment assignments and `&& ...` left out)."""
    words = shlex.split(line)
    at = next(i for i, w in enumerate(words) if w == "idrrun" or w.endswith("/idrrun"))
    words = words[at:]
    return words[:words.index("&&")] if "&&" in words else words


# --- the tests without a cluster ------------------------------------------------------------

def test_every_command_of_the_page_is_run_or_skipped_with_a_reason() -> None:
    commands = page_commands(PAGE.read_text())
    roles = [(rule_for(c).role, c.line) for c in commands]
    assert all(rule_for(c).why for c in commands if rule_for(c).role == SKIP)
    # The day's verbs, in the page's order.
    verbs = [" ".join(idrrun_argv(line)[1:3]) for role, line in roles if role in (TEACHER, STUDENT)]
    order = ["course init", "course init", "classroom release", "classroom list", "classroom fetch",
             "classroom submit", "classroom status", "classroom collect", "grade profile_cg",
             "grade profile_cg", "classroom return", "classroom feedback", "gradebook /root/*/report.csv"]
    assert verbs == order, verbs
    assert [role for role, _ in roles][:1] == [ROSTER]
    assert any(role == PATH for role, _ in roles)


def test_every_rule_and_substitution_still_meets_the_page() -> None:
    assert not stale(PAGE.read_text())


def test_the_hub_is_started_as_the_page_says() -> None:
    """The page's start command is the fixture's, and the settings it gives are the fixture's
    too (tests/test_hub.py) and are read by hub/jupyterhub_config.py."""
    [start] = [c for c in page_commands(PAGE.read_text()) if "jupyterhub -f" in c.line]
    words = shlex.split(substituted(start.line, VALUES))
    settings = [w.split("=", 1)[0] for w in words if re.match(r"IDRRUN_\w+=", w)]
    assert words[len(settings):] == [w.format(**VALUES) for w in HUB_START], words
    config = (ROOT / "hub" / "jupyterhub_config.py").read_text()
    fixture = (ROOT / "tests" / "test_hub.py").read_text()
    for name in settings:
        assert f'"{name}"' in config or f"'{name}'" in config, f"{name}: not read by the hub's config"
    for name in HUB_SETTINGS:
        assert name in settings and f"{name}=" in fixture, name
    assert 'str(VENV / "bin" / "jupyterhub"), "-f",' in fixture


def test_the_roster_is_the_pages_with_the_tests_logins() -> None:
    [roster] = [c for c in page_commands(PAGE.read_text()) if c.where == "roster"]
    text = roster_text(roster.line, ["s0", "s1"])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["submission"], r["login"]) for r in rows] == [("s0", "s0"), ("s1", "s1")]
    assert rows[0]["name"] == "Ann Smith" and rows[0]["email"] == "ann@example.org"


def test_a_page_that_changed_is_caught() -> None:
    """The rules can fail, on scratch copies of the page: a command no rule takes (a verb
    renamed), a skipped command that is no longer the one its reason is about (the hub started
    otherwise), a path a substitution is about that the page no longer has. (A flag that its
    parser takes but that breaks the day, collect's --to changed, fails the cluster's run:
    test_classday.)"""
    text = PAGE.read_text()

    def changed(old: str, new: str) -> str:
        assert old in text, old
        return text.replace(old, new)

    renamed = changed("idrrun classroom status profile_cg", "idrrun classroom progress profile_cg")
    with pytest.raises(AssertionError, match="taken by 0 of the test's rules"):
        [rule_for(c) for c in page_commands(renamed)]
    started = changed("/opt/idrrun/bin/jupyterhub -f hub/jupyterhub_config.py",
                      "/opt/idrrun/bin/jupyterhub --config hub/jupyterhub_config.py")
    with pytest.raises(AssertionError, match="taken by 0 of the test's rules"):
        [rule_for(c) for c in page_commands(started)]
    moved = text.replace("/opt/idrrun/grader-cache", "/srv/idrrun/grader-cache")
    assert stale(moved) == ["substitution '/opt/idrrun/grader-cache'"], stale(moved)
    # ... and the run would not write there: a path of the machine left in a command stops it.
    [grade, _] = [c for c in page_commands(moved) if "idrrun grade " in c.line]
    day = Day(top=Path("/T"), home=Path("/T/root"), venv=Path("/V"), shared=Path("/S"),
              exchange=Path("/T/exchange"), boards=Path("/T/boards"), deadline="", students=(),
              student_env={}, teacher_env={})
    with pytest.raises(AssertionError, match="/srv/idrrun/grader-cache: a path of the machine"):
        day.as_run(grade)
    assert "/S/grader-cache" in day.as_run([c for c in page_commands(text) if "idrrun grade " in c.line][0])


def test_a_root_grader_through_srun_refuses_a_cache_its_steps_cannot_reach() -> None:
    """The page's grade command without IDRRUN_CACHE_DIR, as root: the cache is ~/.cache, in
    root's 0700 home, which the builds' and runs' own users cannot pass; refused before
    grading, the folder and the fix named (the cluster's run does it through srun)."""
    if os.geteuid() != 0:
        pytest.skip("the refusal is a root grader's")
    from idrrun.errors import UsageError
    from idrrun.model import LauncherConfig, Settings
    from idrrun.run import rooms

    top = Path(tempfile.mkdtemp(prefix="idrrun-cache-", dir="/var/tmp"))  # (tmp_path is 0700)
    top.chmod(0o755)
    home = top / "root"
    home.mkdir(mode=0o700)
    settings = Settings(cache_dir=home / ".cache" / "idrrun", launcher=LauncherConfig(kind="srun"))
    try:
        with pytest.raises(UsageError) as refused:
            rooms.scratch_root(settings)
    finally:
        shutil.rmtree(top)
    text = str(refused.value)
    assert f"{home} (mode 700) lets no other user pass" in text, text
    assert "IDRRUN_CACHE_DIR" in text and "\n" not in text, text
