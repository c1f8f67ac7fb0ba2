"""Exercise specs: the course's specs load; broken ones name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from idrrun.checks import specs
from idrrun.errors import SpecError


def test_every_course_spec_loads() -> None:
    exercises = specs.all_exercises(ROOT / "examples")
    assert len(exercises) >= 7
    for ex in exercises:
        assert set(ex.sources) == {"c", "fortran"}, ex.name
        assert ex.checks and ex.host_args


GOOD = """
name = "demo"
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["10"]
[[check]]
kind = "exit_ok"
"""


@pytest.mark.parametrize("change, message", [
    (("demo", "other"), "field 'name': must equal the file name"),
    (('kind = "exit_ok"', 'kind = "speed"'), "field 'check[0].kind': expected one of"),
    (('kind = "exit_ok"', 'kind = "value"\npattern = "x"'), "field 'check[0].pattern': needs a group"),
    (('kind = "exit_ok"', 'kind = "value"\npattern = "x=(\\\\S+)"'), "field 'check[0].expected'"),
    (('kind = "exit_ok"', 'kind = "line"\nregex = "(["'), "field 'check[0].regex': not a valid regular"),
    (('solution = "sol.c"', 'solution = "missing.c"'), "field 'sources.c.solution': no such file missing.c"),
    (('[sources.c]', '[sources.cobol]'), "field 'sources.cobol': unknown language"),
    (('host = ["10"]', 'host = "10"'), "field 'args.host': expected a list"),
    (('name = "demo"', 'name = "demo"\ncolour = 3'), "field 'colour': unknown field"),
    (('kind = "exit_ok"', 'kind = "data_moved"\nmax_bytes = 1e6\nper_iteration = "iterations"'),
     "field 'check[0].per_iteration': needs a group"),
    (('kind = "exit_ok"', 'kind = "regions_ran"\nmin = 0'),
     "field 'check[0].min': a regions_ran check needs min, a whole number ≥ 1"),
    (('kind = "exit_ok"', 'kind = "regions_ran"\nmin = 1.5'), "field 'check[0].min'"),
])
def test_broken_spec(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    (tmp_path / "ex.c").write_text("int main(void){return 0;}\n")
    (tmp_path / "sol.c").write_text("int main(void){return 0;}\n")
    path = tmp_path / "demo.toml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("[", r"\[")) as info:
        specs.load(path)
    assert str(path) in str(info.value)


def test_good_spec_and_unknown_name(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    for f in ("ex.c", "sol.c"):
        (tmp_path / "examples" / f).write_text("int main(void){return 0;}\n")
    (tmp_path / "examples" / "demo.toml").write_text(GOOD)
    from idrrun.model import Settings

    ex = specs.find("demo", Settings(), tmp_path)
    assert ex.host_args == ("10",) and ex.gpu_args == ("10",) and ex.timeout == 60
    (tmp_path / "examples" / "demo.toml").write_text(GOOD + '[[check]]\nkind = "regions_ran"\n'
                                                     '[[check]]\nkind = "regions_ran"\nmin = 3\n')
    ex = specs.find("demo", Settings(), tmp_path)
    assert [c.minimum for c in ex.checks if c.kind == "regions_ran"] == [1, 3]
    with pytest.raises(SpecError, match=r"unknown exercise 'nope' in .* \(known: demo\)"):
        specs.find("nope", Settings(), tmp_path)
