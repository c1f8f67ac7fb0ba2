"""Points and what students see, without processes: scores with partial credit (incomplete
checks counted apart), spec errors that name the line, feedback and notebook verdicts that
follow each check's visibility, resumed rows scored with the spec as it is now."""

from __future__ import annotations

import csv
import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun.authoring import copies
from idrrun.checks import score as score_mod
from idrrun.checks import spec_fields, specs, visibility
from idrrun.display import VerdictView
from idrrun.errors import SpecError
from idrrun.grading import report
from idrrun.grading import feedback as feedback_mod
from idrrun.grading import rows as rows_mod
from idrrun.grading import state as state_mod
from idrrun.grading.discover import Submission
from idrrun.model import CheckResult, Source, Verdict

SPEC = r"""name = "demo_dot"
title = "Dot"
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["10"]
hidden = [["4321"], ["98765"]]

[[check]]
kind = "exit_ok"
points = 1

[[check]]
kind = "matches_solution"
label = "dot"
pattern = 'dot\s*=\s*(\S+)'
points = 3
hidden_points = 1

[[check]]
kind = "source"
label = "reduction"
regex = 'reduction'
points = 2
visibility = "summary"

[[check]]                         # graded, never shown
kind = "line"
exact = "dot = 42"
points = 2
visibility = "hidden"

[[check]]
kind = "ran_on_gpu"
points = 2
"""


def _exercise(tmp_path: Path, text: str = SPEC) -> specs.Exercise:
    for name in ("ex.c", "sol.c"):
        (tmp_path / name).write_text("int main(void) { return 0; }\n")
    (tmp_path / "demo_dot.toml").write_text(text)
    return specs.load(tmp_path / "demo_dot.toml")


def _checks(**status: str) -> tuple[CheckResult, ...]:
    """The checks as grading leaves them: main run, then the two hidden runs (output kinds)."""
    main = [CheckResult("exit_ok", status.get("exit_ok", "pass"), "exit 0", "exit 0", "ended", check=0),
            CheckResult("dot", status.get("dot", "pass"), "1234.5", "1234.5", "agrees", check=1),
            CheckResult("reduction", status.get("reduction", "pass"), "/reduction/", "found",
                        "found", check=2),
            CheckResult("line", status.get("line", "pass"), "'dot = 42'", "found", "printed", check=3),
            CheckResult("ran_on_gpu", status.get("gpu", "incomplete"), "", "", "needs a GPU trace",
                        check=4)]
    hidden = [CheckResult(f"{name} (hidden run {k})", status.get(f"{name}{k}", "pass"), "98765.5",
                          "98765.5", "agrees", hidden=k, kind=kind, check=index)
              for k in (1, 2) for name, kind, index in
              (("exit_ok", "exit_ok", 0), ("dot", "matches_solution", 1), ("line", "line", 3))]
    return (*main, *hidden)


def test_a_score_gives_partial_credit_and_counts_incomplete_points_apart(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    # main run 1 + 3 + 2 + 2 + 2 = 10; each hidden run 1 + 1 + 2 (line keeps its 2 points)
    assert score_mod.possible(ex, 2) == 18
    full = score_mod.score(ex, _checks(), 2)
    assert (full.earned, full.possible, full.not_evaluated) == (16, 18, 2)
    assert str(full) == "16/18, 2 points not evaluated here"
    near = score_mod.score(ex, _checks(reduction="fail", gpu="pass"), 2)
    assert str(near) == "16/18"
    # A wrong result (dot, on the second hidden run) earns at most 40 % of the points, every
    # earned point in proportion, saying why (wrong_result).
    wrong = score_mod.score(ex, _checks(reduction="fail", dot2="fail", gpu="pass"), 2)
    assert str(wrong) == "7.2/18" and wrong.lost == 18 - 7.2
    assert {i.why for i in wrong.items if i.outcome == "lost" and i.why} == {
        "a result that is wrong (dot) earns at most 40 % of the points: 7.8 of the 15 earned are "
        "lost (wrong_result)"}
    unbounded = score_mod.score(_exercise(tmp_path, 'wrong_result = 1.0\n' + SPEC),
                                _checks(reduction="fail", dot2="fail", gpu="pass"), 2)
    assert str(unbounded) == "15/18"
    # The main run failed: no hidden run, nothing earned there, still out of 18.
    crashed = tuple(c for c in _checks(exit_ok="fail", dot="fail", line="fail") if not c.hidden)
    assert str(score_mod.score(ex, crashed, 2)) == "2/18, 2 points not evaluated here"
    # idrrun's own rows (check -1) are worth nothing.
    extra = (CheckResult("OpenACC build", "incomplete", check=-1),)
    assert score_mod.score(ex, _checks() + extra, 2) == full
    assert score_mod.points(1 / 3) == "0.33" and score_mod.points(2.0) == "2"


@pytest.mark.parametrize("change, field", [
    (("points = 3\n", "points = -3\n"), "check[1].points"),
    (("points = 3\n", "points = 'three'\n"), "check[1].points"),
    (("regex = 'reduction'\n", "regex = 'reduction'\nhidden_points = 1\n"), "check[2].hidden_points"),
    (("kind = \"ran_on_gpu\"\npoints = 2", "kind = \"ran_on_gpu\"\npoints = 2\nhidden_points = 1"),
     "check[4].hidden_points"),
    (('visibility = "summary"', 'visibility = "secret"'), "check[2].visibility"),
    # promised points that nobody can earn, or that wait for a check that does not exist
    (('hidden = [["4321"], ["98765"]]\n', ""), "check[1].hidden_points"),
    (('visibility = "summary"', 'visibility = "summary"\ncounts_when = ["dott"]'), "check[2].counts_when"),
    (('visibility = "summary"', 'visibility = "summary"\ncounts_when = ["reduction"]'),
     "check[2].counts_when"),
    (('visibility = "summary"', 'visibility = "summary"\ncounts_when = "dot"'), "check[2].counts_when"),
    (("kind = \"ran_on_gpu\"\npoints = 2", "kind = \"uses_openmp\"\npoints = 2"), "check[4].kind"),
    (('title = "Dot"', 'title = "Dot"\nvisibility = "hidden"'), "visibility"),
])
def test_grading_fields_are_checked_and_errors_name_the_line(tmp_path: Path, change: tuple[str, str],
                                                            field: str) -> None:
    assert SPEC.count(change[0]) >= 1
    text = SPEC.replace(change[0], change[1], 1)
    with pytest.raises(SpecError) as err:
        _exercise(tmp_path, text)
    # FILE:LINE: as compilers write it, the line of the field itself
    prefix, _, rest = str(err.value).partition(f": field '{field}': ")
    assert rest, err.value
    path, _, line = prefix.rpartition(":")
    assert path.endswith("demo_dot.toml")
    key = field.split(".")[-1]
    assert text.splitlines()[int(line) - 1].startswith(f"{key} = "), (line, text)
    if field.startswith("check[4]"):
        assert sum(s.startswith("[[check]]") for s in text.splitlines()[:int(line)]) == 5


def test_spec_errors_say_why_the_points_could_not_be_earned(tmp_path: Path) -> None:
    def error(old: str, new: str) -> str:
        assert old in SPEC
        with pytest.raises(SpecError) as err:
            _exercise(tmp_path, SPEC.replace(old, new, 1))
        return str(err.value)

    assert "'dot' promises 1 points on each hidden run, and the exercise has no hidden case" in \
        error('hidden = [["4321"], ["98765"]]\n', "")
    said = error('visibility = "summary"', 'visibility = "summary"\ncounts_when = ["dott"]')
    assert "no check is labelled 'dott' (did you mean dot?)" in said and "never runs" in said
    assert "cannot wait for itself" in error('visibility = "summary"',
                                             'visibility = "summary"\ncounts_when = ["reduction"]')
    # two checks that wait for each other: neither could ever count
    cycle = SPEC.replace('hidden_points = 1\n', 'hidden_points = 1\ncounts_when = ["reduction"]\n', 1)
    with pytest.raises(SpecError, match="waits, through the checks it counts on, for itself"):
        _exercise(tmp_path, cycle.replace('visibility = "summary"',
                                          'visibility = "summary"\ncounts_when = ["dot"]', 1))
    assert "the exercise's model is openacc: it could never pass" in error(
        'kind = "ran_on_gpu"', 'kind = "uses_openmp"')
    # A students' copy has had its hidden cases removed: grading runs them.
    students = "students = true\n" + SPEC.replace('hidden = [["4321"], ["98765"]]\n', "")
    assert _exercise(tmp_path, students).students


def test_points_wait_for_the_checks_they_count_on(tmp_path: Path) -> None:
    """counts_when: the dot's points count once the reduction passes; while it fails they are
    lost, saying why; while what they wait for could not be judged here (a GPU trace on a
    host), they are not evaluated either: the points follow what can be judged."""
    ex = _exercise(tmp_path, SPEC.replace('hidden_points = 1\n',
                                          'hidden_points = 1\ncounts_when = ["reduction"]\n', 1))
    assert ex.checks[1].counts_when == (2,)
    assert score_mod.score(ex, _checks(), 2) == score_mod.score(_exercise(tmp_path), _checks(), 2)
    lost = score_mod.score(ex, _checks(reduction="fail"), 2)
    assert str(lost) == "9/18, 2 points not evaluated here"
    dot = [i for i in lost.items if i.check == 1]
    assert [(i.hidden, i.outcome) for i in dot] == [(0, "lost"), (1, "lost"), (2, "lost")]
    assert dot[0].why == "3 points for dot count once the source has reduction"
    assert dot[1].why == "1 point for dot counts once the source has reduction"
    on_gpu = _exercise(tmp_path, SPEC.replace('hidden_points = 1\n',
                                              'hidden_points = 1\ncounts_when = ["runs on the GPU"]\n', 1))
    here = score_mod.score(on_gpu, _checks(), 2)
    assert (here.earned, here.not_evaluated, here.evaluated) == (11, 7, 11)
    assert next(i for i in here.items if i.check == 1).why == (
        "3 points for dot count once kernels run on the GPU, which could not be judged here")
    # A program that did not build: one row, every point lost, each saying why.
    built = score_mod.score(ex, (CheckResult("builds", "fail", kind=specs.BUILD_ROW),), 2)
    assert str(built) == "0/18" and len(built.items) == 5 + 2 * 3
    assert {i.why for i in built.items} == {score_mod.NOT_BUILT}


def test_field_line_finds_tables_keys_and_the_closest_place_of_a_missing_field() -> None:
    text = (ROOT / "examples" / "intro_pi.toml").read_text()
    lines = text.splitlines()
    assert lines[spec_fields.field_line(text, "args.draw.ranges[0]") - 1].startswith("ranges")  # type: ignore[operator]
    assert lines[spec_fields.field_line(text, "sources.fortran.solution") - 1].startswith("solution")  # type: ignore[operator]
    at = spec_fields.field_line(text, "check[3].expected")  # absent: its [[check]]
    assert at is not None and lines[at - 1].startswith("[[check]]")
    assert sum(line.startswith("[[check]]") for line in lines[:at]) == 4
    assert spec_fields.field_line("", "name") is None


def _row(ex: specs.Exercise, checks: tuple[CheckResult, ...]) -> rows_mod.GradeRow:
    row = rows_mod.GradeRow("ann", ex.name, "c", "incomplete", 0.1, 0.1, "/class/ann.c", checks=checks,
                          hidden_args=(("4321",), ("98765",)))
    return rows_mod.scored(row, ex)


def test_feedback_shows_what_each_check_lets_students_see(tmp_path: Path) -> None:
    # A wrong result's points unbounded (wrong_result = 1): what is shown, not how much.
    ex = _exercise(tmp_path, "wrong_result = 1.0\n" + SPEC)
    row = _row(ex, _checks(dot1="fail"))
    text = feedback_mod.feedback_markdown(row, ex)
    # Out of the points evaluated here, those that were not named.
    assert "Score: **15/16**, out of the 16 points evaluated here; not evaluated here: ran_on_gpu " \
        "(2 points of 18)" in text
    assert "| dot | 3/3 | pass | 1234.5 | 1234.5 | agrees |" in text  # shown
    assert f"| reduction | 2/2 | pass |  |  | {visibility.SUMMARY_ONLY} |" in text  # summary: no regex
    assert "/reduction/" not in text
    # A hidden check: not a word of it, but that there is one (three rows: main, two hidden runs).
    assert "dot = 42" not in text and "| line" not in text
    assert "\n3 more checks graded and not shown here.\n" in text
    # Hidden runs: their result and kind, never their arguments nor values.
    assert "| dot (hidden run 1) | 0/1 | fail |  |  | a check on a hidden case (same as the solution)" in text
    for secret in ("4321", "98765"):
        assert secret not in text
    # Before the deadline: every check's result only.
    summary = feedback_mod.feedback_markdown(row, ex, "summary")
    assert "1234.5" not in summary and "| dot | 3/3 | pass |  |  |" in summary and "| line" not in summary
    # After: every check, the hidden one too; hidden cases' values only with `full`.
    shown = feedback_mod.feedback_markdown(row, ex, "shown")
    assert "| line | 2/2 | pass | 'dot = 42' |" in shown and "/reduction/" in shown and "98765" not in shown
    full = feedback_mod.feedback_markdown(row, ex, "full")
    assert "dot (hidden run 1) (arguments: 4321) | 0/1 | fail | 98765.5 |" in full
    # The instructor's report keeps everything.
    assert "'dot = 42'" in json.dumps(rows_mod.record(row))


def test_a_notebook_verdict_hides_what_the_spec_hides_and_says_grading_runs_more(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    notebook = ex.without_grading_only()
    assert [c.label for c in notebook.checks] == ["ends normally", "dot", "reduction", "runs on the GPU"]
    assert notebook.more_at_grading and not notebook.hidden_args
    main = tuple(c for c in _checks(reduction="fail") if not c.hidden and c.check != 3)
    verdict = visibility.student_verdict(Verdict("demo_dot", main), notebook)
    assert verdict.more_at_grading
    reduction = next(c for c in verdict.checks if c.name == "reduction")
    assert (reduction.expected, reduction.got, reduction.reason) == ("", "", visibility.SUMMARY_ONLY)
    view = VerdictView(verdict)
    assert visibility.MORE_AT_GRADING in str(view) and "/reduction/" not in str(view)
    assert "/reduction/" not in view._repr_html_() and "Grading runs more checks" in view._repr_html_()
    # An exercise with nothing held back says nothing more.
    plain = _exercise(tmp_path, SPEC.replace('hidden = [["4321"], ["98765"]]\n', "")
                      .replace("hidden_points = 1\n", "")
                      .replace('visibility = "hidden"', 'visibility = "shown"')).without_grading_only()
    assert not plain.more_at_grading
    assert visibility.MORE_AT_GRADING not in str(VerdictView(Verdict("demo_dot", main[:2])))


def test_students_copy_forgets_the_checks_it_drops_in_counts_when(tmp_path: Path) -> None:
    """A check that waits for a hidden one: the students' copy keeps the check, not the wait
    (a notebook scores nothing), and loads."""
    spec = SPEC.replace('visibility = "summary"', 'visibility = "summary"\ncounts_when = ["prints \'dot = 42\'", "runs on the GPU"]')
    assert _exercise(tmp_path, spec).checks[2].counts_when == (3, 4)
    text = copies.students_spec(spec, solutions_kept=())
    assert 'counts_when = ["runs on the GPU"]' in text, text
    assert _exercise(tmp_path, text).checks[2].counts_when == (3,)


def test_students_copy_drops_hidden_checks_and_says_grading_runs_more(tmp_path: Path) -> None:
    text = copies.students_spec(SPEC, solutions_kept=())
    data = tomllib.loads(text)
    assert "dot = 42" not in text and "hidden" not in data["args"]
    assert [c.get("label", c["kind"]) for c in data["check"]] == ["exit_ok", "dot", "reduction", "ran_on_gpu"]
    assert data["students"] is True and data["more_at_grading"] is True
    assert copies.students_spec(text, solutions_kept=()) == text


def test_a_resumed_row_is_scored_with_the_points_the_spec_has_now(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    path, key = tmp_path / "r.csv", b"k" * 32
    sub = Submission("ann", Path("/class/ann.c"), Source("int main(void) {}\n", "ann.c", "c", False, 1, Path("/class"), ".c"),
                     digest="d" * 64)
    row = dataclasses.replace(_row(ex, _checks()), content=state_mod.content_key(sub, ex, "policy"))
    report.write_report([row], path, key)
    assert next(csv.DictReader(path.open()))["score"] == "16.0"
    cheaper = _exercise(tmp_path, SPEC.replace("points = 3\nhidden_points = 1", "points = 1\nhidden_points = 1"))
    kept, said = state_mod.resume(path, cheaper, [sub], key, "policy")
    assert str(kept["/class/ann.c"].score) == "14/16, 2 points not evaluated here", said
    # What a check tests is not scoring: changing it grades the row again.
    stricter = _exercise(tmp_path, SPEC.replace("exact = \"dot = 42\"", "exact = \"dot = 43\""))
    kept, said = state_mod.resume(path, stricter, [sub], key, "policy")
    assert kept == {} and "another exercise spec" in " ".join(said)
    # A row written before checks named their [[check]]: it cannot be scored, so it is graded again.
    state = state_mod.state_path(path)
    records = json.loads(state.read_text())
    for check in records[0]["checks"]:
        del check["check"]
    records[0]["mac"] = state_mod._mac(records[0], key)
    state.write_text(json.dumps(records))
    assert state_mod.load_report(path, ex.name, key) == {}


def test_a_build_that_failed_with_no_message_on_a_line_shows_the_end_of_its_output(tmp_path: Path) -> None:
    """A compiler that died (a wrapper that finds no compiler, an internal error, the judge's
    refusal) places no error on the student's lines: the feedback shows the build's last lines."""
    from idrrun import annotate
    from idrrun.model import Diagnostic, Failure, FailureKind

    said = "\n".join(f"line {i}" for i in range(30)) + "\nmpicc: unable to find the compiler 'gcc'\n"
    failure = Failure(FailureKind.COMPILE_ERROR, "exit code 1", output=said)
    kept = rows_mod._unplaced_output(failure, None)
    assert kept.splitlines()[-1] == "mpicc: unable to find the compiler 'gcc'"
    assert len(kept.splitlines()) == rows_mod.FAILURE_OUTPUT_LINES
    placed = annotate.Listing("ann.c", "c", (), diagnostics=(
        Diagnostic("ann.c", 3, None, "error", "expected ';'"),))
    assert rows_mod._unplaced_output(failure, placed) == ""  # its messages say it on their lines
    assert rows_mod._unplaced_output(Failure(FailureKind.EXIT_STATUS, "exit code 1", output=said),
                                   None) == ""  # a run's output is the checks' excerpts
    ex = _exercise(tmp_path)
    row = dataclasses.replace(_row(ex, ()), status="fail", failure=FailureKind.COMPILE_ERROR,
                              failure_what="exit code 1", failure_output=kept)
    text = feedback_mod.feedback_markdown(row, ex)
    assert "The end of the build's output:" in text and "unable to find the compiler" in text
