"""The one option spec: IDRIS-compatible flags, shlex-correct values, clear usage errors."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from idrrun.errors import UsageError
from idrrun.request import options
from idrrun.request.options import FlagSpec, Options, parse_line, specs


def parse(line: str) -> Options:
    opts = parse_line(line)
    assert opts is not None
    return opts


@pytest.mark.parametrize("line", ['-a --accopts cc70,pinned', '-a --accopts "cc70,pinned"',
                                  "-a --accopts 'cc70 pinned'", "--acc --accopts=cc70,pinned"])
def test_accopts_quoted_or_not(line: str) -> None:
    assert parse(line).accopts == ("cc70", "pinned")


def test_options_values_may_start_with_a_dash() -> None:
    assert parse('--options "-O3 -g"').compiler_options == ("-O3", "-g")
    assert parse("--options -O3").compiler_options == ("-O3",)
    assert parse('--option "-DN=4 -Wall"').compiler_options == ("-DN=4", "-Wall")


def test_cliopts_keep_quoted_words_together() -> None:
    assert parse("""--cliopts "10 'two words' -v" """).program_args == ("10", "two words", "-v")
    assert parse("--cliopts 42").program_args == ("42",)


def test_every_idris_flag() -> None:
    o = parse("-a -l fortran -c gcc -t --threads 4 -m 2 -g 1 --get out.dat log.txt --notime "
              "--profile -n --object -k saved.f90 --timeout 12.5 --force --no-raise --exercise ex1")
    assert (o.acc, o.language, o.family, o.openmp, o.threads, o.mpi_ranks, o.gpus) == (
        True, "fortran", "gcc", True, 4, 2, 1)
    assert o.get_files == ("out.dat", "log.txt")
    # Switches store what they mean for the request: --notime is show_time=False, -n execute=False.
    assert (o.show_time, o.profile, o.execute, o.object_only, o.keep) == (
        False, "auto", False, True, "saved.f90")
    assert (o.timeout, o.force, o.raise_on_failure, o.check) == (12.5, True, False, "ex1")
    assert parse("--profiler builtin").profile == "builtin"


def test_nothing_given_is_none_everywhere() -> None:
    # "Not given" stays None until request/resolve.py applies the layers, switches included.
    assert parse("") == Options() and all(v is None for v in vars(parse("")).values())


@pytest.mark.parametrize("line, message", [
    ("--bogus", "unrecognized arguments: --bogus"),
    ("-m zero", "expected a whole number"),
    ("-m 0", "expected a number >= 1"),
    ("--timeout -3", "expected a number of seconds"),
    ("-c intel", "invalid choice: 'intel'"),
    ('--cliopts "unterminated', "cannot read the line"),
])
def test_bad_flags_are_usage_errors(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_line(line)


def test_help_is_shown_and_nothing_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_line("--help") is None
    assert "--accopts" in capsys.readouterr().out


def test_mypy_strict_is_clean() -> None:
    """The package is typed; a regression here is a defect like any other."""
    import subprocess
    import sys

    from conftest import ROOT

    mypy = pytest.importorskip("mypy")
    assert mypy
    r = subprocess.run([sys.executable, "-m", "mypy", "idrrun"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(("line", "said"), [
    # IDRIS's multi-GPU notebook: argparse read `-o pts`, then `-c "pp -Dmultigpu"`
    ('-a -opts "-cpp -Dmultigpu"', "-opts is not an option (it reads as -o pts): did you mean --options?"),
    ("-chck intro_pi", "-chck is not an option (it reads as -c hck): did you mean --check?"),
])
def test_a_long_option_shortened_with_one_dash_says_which_was_meant(line: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_line(line, show_help=False)
    assert str(caught.value) == f"%%idrrun: {said}"


def test_both_typos_of_a_magic_line_are_named_at_once() -> None:
    # IDRIS's multi-GPU notebook spells both: one run of the cell names both
    with pytest.raises(UsageError) as caught:
        parse_line('-a -opts "-cpp -DMULTIGPU" -cliopts "2000 1000"', show_help=False)
    assert str(caught.value) == (
        "%%idrrun: -opts is not an option (it reads as -o pts): did you mean --options?; "
        "-cliopts is not an option (it reads as -c liopts): did you mean --cliopts?")


def test_a_shortening_that_fits_several_options_suggests_none() -> None:
    # --option and --options both fit `-opt`: no guess between them
    with pytest.raises(UsageError) as caught:
        parse_line("-opt -O3", show_help=False)
    assert "did you mean --option" not in str(caught.value)


# --- README's flag table is the option spec's: its rows are rendered from the FlagSpecs ---

README_TABLE_HEAD = "| flag | meaning |\n|---|---|\n"


def _spelling(name: str, spec: FlagSpec, first_long: bool, overrides: dict[str, object]) -> str:
    """`--language c\\|c++`: a spelling, with what it takes after the first long one."""
    parse = overrides.get("parse", spec.parse)
    if parse is None or not first_long:
        return f"`{name}`"
    choices = overrides.get("choices", spec.choices)
    metavar = overrides.get("metavar", spec.metavar)
    shown = metavar if metavar is not None else "|".join(choices()) if callable(choices) else "VALUE"
    return f"`{name} {shown}{'...' if spec.many else ''}`".replace("|", "\\|")


def _spellings(spec: FlagSpec) -> list[str]:
    forms = [(spec.names, {})] + [(names, dict(over)) for names, over in spec.variants]
    out = []
    for names, overrides in forms:
        longs = [n for n in names if n.startswith("--")]
        out += [_spelling(n, spec, bool(longs) and n == longs[0], overrides) for n in names]
    return out


def readme_table() -> str:
    """The flag table README.md must hold: one row per flag, flags side by side with the same
    text in one row."""
    rows: list[tuple[list[str], str]] = []
    for _, spec in specs():
        assert spec.readme, f"{spec.names[0]}: its FlagSpec has no readme text"
        if rows and rows[-1][1] == spec.readme:
            rows[-1][0].extend(_spellings(spec))
        else:
            rows.append((_spellings(spec), spec.readme))
    return README_TABLE_HEAD + "".join(f"| {', '.join(names)} | {text} |\n" for names, text in rows)


def readme_flag_table(readme: str) -> str:
    start = readme.index(README_TABLE_HEAD)
    end = readme.index("\n\n", start)
    return readme[start:end + 1]


def _flags_in(table: str) -> set[str]:
    return {m.group(1) for row in table.splitlines()[2:]
            for m in re.finditer(r"`(--?[A-Za-z][\w-]*)", row.split(" | ")[0])}


def table_faults(table: str) -> list[str]:
    """What a flag table says that the option spec does not."""
    spec_flags = {n for _, spec in specs() for n in spec.names + tuple(
        name for names, _ in spec.variants for name in names)}
    faults = [f"{flag} is not in the table" for flag in sorted(spec_flags - _flags_in(table))]
    faults += [f"{flag} is in the table, no FlagSpec has it"
               for flag in sorted(_flags_in(table) - spec_flags)]
    if table != readme_table():
        faults.append("the table is not as request/options.py says it:\n" + readme_table())
    return faults


def test_the_readme_flag_table_is_the_option_spec() -> None:
    assert table_faults(readme_flag_table((ROOT / "README.md").read_text())) == []


def test_a_row_missing_from_the_readme_table_is_found() -> None:
    readme = (ROOT / "README.md").read_text()
    without = "".join(row for row in readme.splitlines(keepends=True) if "`--sandbox" not in row)
    faults = table_faults(readme_flag_table(without))
    assert faults[0] == "--sandbox is not in the table", faults
    extra = readme.replace("| `--notime` |", "| `--notime`, `--quiet` |")
    assert "--quiet is in the table, no FlagSpec has it" in table_faults(readme_flag_table(extra))


def test_a_line_read_once_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A notebook's cells repeat their lines: a line's Options are kept, argparse reads it once
    (~0.1 ms a cell); a line that asks for the help prints it every time, a wrong one raises
    every time."""
    first = options.parse_line("-a --force --timeout 7")
    assert first is not None and first.timeout == 7.0 and first.force
    parser = options._parser("%%idrrun", False)

    def parse_args(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(parser, "parse_args", parse_args)
    assert options.parse_line("-a --force --timeout 7") is first
    monkeypatch.undo()
    for _ in range(2):
        assert options.parse_line("--help") is None
        assert "--timeout" in capsys.readouterr().out
        with pytest.raises(UsageError):
            options.parse_line("-a --timeout")
