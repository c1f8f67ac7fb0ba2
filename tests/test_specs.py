"""Exercise specs: the course's specs load; broken ones name the file and the field; hidden
argument sets drawn from a spec's ranges depend on the seed alone."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun.checks import draw, specs
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
    (('kind = "exit_ok"', 'kind = "velocity"'), "field 'check[0].kind': expected one of"),
    (('kind = "exit_ok"', 'kind = "speed"\nfull = 10\nnone = 1.5'), "field 'check[0].full': a speed check needs full and none"),
    (('kind = "exit_ok"', 'kind = "gpu_busy"\nmin = 0.25\nmin_ratio = 0.7'), "field 'check[0].min': a gpu_busy check has min"),
    (('kind = "exit_ok"', 'kind = "gpu_busy"\nmin_ratio = 1.5'), "field 'check[0].min_ratio': expected a ratio"),
    (('kind = "exit_ok"', 'kind = "exit_ok"\ncounts_in_part = ["nothing"]'), "field 'check[0].counts_in_part': no check is labelled"),
    (('name = "demo"', 'name = "demo"\nwrong_result = 1.5'), "field 'wrong_result': expected a share"),
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
    (('host = ["10"]', 'host = ["10"]\ndraw = 3'), "field 'args.draw': expected a table"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {ranges = [[1, 9]]}'), "field 'args.draw.sets': expected"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 0, ranges = [[1, 9]]}'), "field 'args.draw.sets'"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = true, ranges = [[1, 9]]}'), "field 'args.draw.sets'"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = []}'), "field 'args.draw.ranges'"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [[1, 9], [5, 1]]}'),
     "field 'args.draw.ranges[1]': low 5 is above high 1"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [["1", 9]]}'),
     "field 'args.draw.ranges[0]': expected [low, high]"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [[1]]}'),
     "field 'args.draw.ranges[0]': expected [low, high]"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [[0.5, 1.5, 2]]}'),
     "field 'args.draw.ranges[0]': a step needs whole numbers"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [[1, 9, 0]]}'),
     "field 'args.draw.ranges[0]': the step must be 1 or more"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [[0.0, inf]]}'),
     "field 'args.draw.ranges[0]': expected finite numbers"),
    (('host = ["10"]', 'host = ["10"]\ndraw = {sets = 2, ranges = [[1, 9]], seed = 4}'),
     "field 'args.draw.seed': unknown field"),
    (('host = ["10"]', 'host = ["10"]\nstart = "cpu"'), "field 'args.start': expected \"host\", \"gpu\" or a list of arguments"),
    (('kind = "exit_ok"', 'kind = "agrees_with_host"\npattern = "x"'),
     "field 'check[0].pattern': needs a group"),
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


DRAWN = GOOD.replace('host = ["10"]', """host = ["10"]
hidden = [["7"]]                  # a fixed set, run first
[args.draw]
sets = 3
ranges = [[1000, 2000000], [0.001, 0.002], [41, 99, 2]]""")


def _drawn_spec(tmp_path: Path, name: str = "demo") -> specs.Exercise:
    for f in ("ex.c", "sol.c"):
        (tmp_path / f).write_text("int main(void){return 0;}\n")
    path = tmp_path / f"{name}.toml"
    path.write_text(DRAWN.replace('"demo"', f'"{name}"'))
    return specs.load(path)


def test_drawn_sets_depend_on_the_seed_alone(tmp_path: Path) -> None:
    ex = _drawn_spec(tmp_path)
    assert ex.draw is not None and ex.draw.sets == 3 and ex.hidden_args == (("7",),)
    random.seed(1)
    before = random.random()
    first = draw.drawn(ex, "spring-2026")
    random.seed(1)
    assert random.random() == before  # random's global state is not used
    assert first.draw is None and first.hidden_args[0] == ("7",) and len(first.hidden_args) == 4
    for n, dt, steps in first.hidden_args[1:]:
        assert 1000 <= int(n) <= 2000000
        assert 0.001 <= float(dt) <= 0.002 and len(dt.replace(".", "").lstrip("0")) <= 6
        assert 41 <= int(steps) <= 99 and int(steps) % 2 == 1
    # The same seed: the same sets, from another copy of the spec too; set i does not depend
    # on how many are drawn; another seed or another exercise: other sets.
    (tmp_path / "copy").mkdir()
    assert draw.drawn(_drawn_spec(tmp_path / "copy"), "spring-2026").hidden_args == first.hidden_args
    fewer = dataclasses.replace(ex, draw=dataclasses.replace(ex.draw, sets=1))
    assert draw.drawn(fewer, "spring-2026").hidden_args == first.hidden_args[:2]
    other = draw.drawn(ex, "autumn-2026")
    assert other.hidden_args[0] == ("7",) and set(other.hidden_args[1:]).isdisjoint(first.hidden_args[1:])
    renamed = _drawn_spec(tmp_path, "demo2")
    assert draw.drawn(renamed, "spring-2026").hidden_args[1:] != first.hidden_args[1:]
    # Many seeds cover each range, its ends included for a small one.
    values = {draw.drawn(ex, f"seed {i}").hidden_args[1][2] for i in range(400)}
    assert values == {str(v) for v in range(41, 100, 2)}



def test_timed_checks_are_declared_with_their_kind() -> None:
    """A kind whose figure is a time or a share of time is timed (TIMED_KINDS): its runs get a
    GPU and CPUs of their own, its figure is measured over several runs; counts and bytes are not."""
    assert set(specs.TIMED_KINDS) <= set(specs.CHECK_KINDS)
    assert "gpu_busy" in specs.TIMED_KINDS
    assert not {"data_moved", "queues", "ran_on_gpu", "value"} & set(specs.TIMED_KINDS)
    course = {ex.name: ex for ex in specs.all_exercises(ROOT / "examples")}
    assert "speed" in specs.TIMED_KINDS
    # Every exercise of the course whose marks a host cannot judge fully already (a GPU-trace
    # check) has a speed check too (its run's time against the solution's): it is timed; so do
    # those whose lesson is speed (tiling, loop clauses: issue 47's slow ports passed every
    # other check at 26.6x and 54x the solution's), graded only (a notebook's --check leaves it).
    assert course["profile_cg"].timed and not course["intro_saxpy"].timed
    assert {name for name, ex in course.items() if ex.timed} == \
        {name for name, ex in course.items() if any(c.kind in ("gpu_busy", "speed") for c in ex.checks)}
    for name, ex in course.items():
        gpu_only = [c for c in ex.checks if c.kind in (*specs.TRACE_KINDS, "agrees_with_host")
                    and c.kind != "speed"]
        speed = [c for c in ex.checks if c.kind == "speed"]
        assert bool(speed) == (bool(gpu_only) or name in ("tiling_laplace", "loops_matvec")), name
        assert all(c.grading_only for c in speed), name
