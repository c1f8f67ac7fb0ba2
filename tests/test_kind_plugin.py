"""A check kind added from outside idrrun (tests/plugins/toy_kind.py): one record registered at
run time is read by specs (its fields, its errors), graded for real (gcc, `idrrun grade`: the
main run and each hidden run), named in words and scored, counts_when included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun import cli
from idrrun.checks import registry, specs, words
from idrrun.errors import SpecError

PLUGINS = ROOT / "tests" / "plugins"
SPEC = """name = "toy_lines"
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["3"]
hidden = [["5"]]

[[check]]
kind = "line_count"
min = 3
points = 2
hidden_points = 1
counts_when = ["prints 'done'"]

[[check]]
kind = "line"
exact = "done"
"""
PROGRAM = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < n - 1; i++)
        printf("line %d\n", i);
    printf("%s\n", DONE);
    return 0;
}
"""


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(PLUGINS))
    import toy_kind

    assert registry.get("line_count") is None
    toy_kind.register()
    try:
        yield
    finally:
        registry.unregister("line_count")


def _course(folder: Path) -> Path:
    examples = folder / "examples"
    examples.mkdir()
    (examples / "toy_lines.toml").write_text(SPEC)
    for name in ("ex.c", "sol.c"):
        (examples / name).write_text(PROGRAM.replace("DONE", '"done"'))
    return examples


def test_unknown_until_registered(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="expected one of .*got 'line_count'"):
        specs.load(_course(tmp_path) / "toy_lines.toml")


def test_a_toy_kind_is_one_record(toy: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    examples = _course(tmp_path)
    exercise = specs.load(examples / "toy_lines.toml")
    assert [c.label for c in exercise.checks] == ["enough lines", "prints 'done'"]
    assert exercise.checks[0].minimum == 3 and exercise.checks[0].counts_when == (1,)
    assert "line_count" in specs.CHECK_KINDS and "line_count" in specs.OUTPUT_KINDS
    assert words.kind_label("line_count") == "enough lines"
    # its own fields, checked by its reader; another kind's field is not its own
    bad = SPEC.replace("min = 3", "min = -1")
    (examples / "toy_lines.toml").write_text(bad)
    with pytest.raises(SpecError, match=r"check\[0\]\.min': a line_count check needs min"):
        specs.load(examples / "toy_lines.toml")
    (examples / "toy_lines.toml").write_text(SPEC.replace("min = 3", "min = 3\nexpected = 2"))
    with pytest.raises(SpecError, match=r"check\[0\]\.expected': not a field of a line_count check"):
        specs.load(examples / "toy_lines.toml")
    (examples / "toy_lines.toml").write_text(SPEC)
    # graded for real: the main run (3 lines) and the hidden run (5 lines)
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "good.c").write_text(PROGRAM.replace("DONE", '"done"'))
    (klass / "short.c").write_text(PROGRAM.replace("n - 1", "n - 2").replace("DONE", '"done"'))
    (klass / "undone.c").write_text(PROGRAM.replace("DONE", '"not yet"'))
    monkeypatch.setenv("IDRRUN_EXAMPLES", str(examples))
    report = tmp_path / "report.json"
    code = cli.main(["grade", "toy_lines", *(str(p) for p in sorted(klass.iterdir())),
                     "--report", str(report)])
    assert code == 0
    rows = {r["student"]: r for r in json.loads(report.read_text())}
    # 2 + 1 (line_count, main and hidden) + 1 + 1 (line, main and hidden) = 5; short prints
    # one line too few: 2 of 3 on the main run, 4 of 3 on the hidden one; a kind of what the
    # program prints judges its result: short's is wrong, and earns at most 40 % (wrong_result)
    assert {s: (r["score"], r["points"]) for s, r in rows.items()} == {
        "good": (5, 5), "short": (2, 5), "undone": (0, 5)}, rows
    checks = {c["name"]: c for c in rows["short"]["checks"]}
    assert checks["enough lines"]["status"] == "fail" and checks["enough lines"]["got"] == "2"
    assert checks["enough lines (hidden run 1)"]["kind"] == "line_count"
    # undone prints enough lines, and they wait for 'done': its line_count passes, earns nothing
    assert {c["name"]: c["status"] for c in rows["undone"]["checks"]}["enough lines"] == "pass"


def test_a_trace_kind_registered_later_is_judged_by_a_gpu_only() -> None:
    """The lists made of the kinds are made when asked: a trace kind a plug-in registers after
    idrrun was imported is among the kinds only a GPU judges (grades.GPU_KINDS, which was a
    copy made at import: it missed it), and its points are among those a host cannot evaluate.
    (Seen failing with GPU_KINDS copied at import.)"""
    from idrrun.checks.specs import CheckSpec, Exercise
    from idrrun.grading import grades
    from idrrun.model import CheckResult

    kind = registry.Kind("toy_kernels", "trace", "toy kernels", "kernels run",
                         trace=lambda spec, values, ev: CheckResult(spec.label, "pass"))
    registry.register(kind)
    try:
        assert kind.needs_gpu and "toy_kernels" in grades.GPU_KINDS
        exercise = Exercise("toy", "toy", "toy", Path("toy.toml"), 10.0, (), {}, (), (), checks=(
            CheckSpec("toy_kernels", "toy kernels", points=3),
            CheckSpec("exit_ok", "ends normally", points=1)))
        said = grades.before_grading(exercise, 4, gpu=False)
        assert said.startswith("this machine has no GPU: 3 of 4 points (toy kernels)"), said
    finally:
        registry.unregister("toy_kernels")
    assert "toy_kernels" not in grades.GPU_KINDS
