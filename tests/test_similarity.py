"""`idrrun similarity`: a class's submissions compared with each other and with the published
solution, the start file removed first (tests/data/similarity: a class of six for loops_matvec)."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import copydetect
import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.errors import UsageError
from idrrun.grading import similarity

EXAMPLES = ROOT / "examples"
CLASS = ROOT / "tests" / "data" / "similarity"
STUDENTS = ("ana", "ben", "chloe", "dan", "eve", "finn")
START_C = (EXAMPLES / "C" / "loops_matvec_exercise.c").read_text()
SOLUTION_C = (EXAMPLES / "C" / "loops_matvec_solution.c").read_text()


def idrrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def klass(tmp_path: Path) -> list[str]:
    folder = tmp_path / "class"
    shutil.copytree(CLASS, folder, ignore=shutil.ignore_patterns("*.md"), dirs_exist_ok=True)
    return [str(folder / f"{name}.c") for name in STUDENTS]


def pairs_of(report: dict[str, object]) -> dict[frozenset[str], dict[str, object]]:
    found = {}
    for pair in report["pairs"]:  # type: ignore[attr-defined]
        first = "SOLUTION" if pair["first_published"] else pair["first"]
        second = "SOLUTION" if pair["second_published"] else pair["second"]
        found[frozenset((first, second))] = pair
    return found


def test_both_copies_are_found_and_honest_work_is_not_flagged(tmp_path: Path) -> None:
    r = idrrun("similarity", "loops_matvec", *klass(tmp_path), "--report", str(tmp_path / "s.json"),
               cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((tmp_path / "s.json").read_text())
    pairs = pairs_of(report)
    # dan copied ana, renaming her variables and rewording her comments; eve copied the
    # published solution the same way: both are found, whole; nothing else is listed.
    assert set(pairs) == {frozenset(("ana", "dan")), frozenset(("eve", "SOLUTION"))}, pairs
    for pair in pairs.values():
        assert min(pair["shares"]) > 0.95  # type: ignore[call-overload]
    assert report["unchanged"] == ["finn"]  # the start file, as it was given
    # The passages: line ranges and the text, side by side; ana's data region is in dan's.
    ana_dan = pairs[frozenset(("ana", "dan"))]
    passage = ana_dan["passages"][0]  # type: ignore[index]
    sides = {ana_dan["first"]: passage["first"], ana_dan["second"]: passage["second"]}
    assert sides["ana"]["lines"][0] <= 32 <= sides["ana"]["lines"][1]
    assert "#pragma acc enter data create(A[0:nn], x[0:n], y[0:n])" in sides["ana"]["text"]
    assert "for (int ligne = 0; ligne < n; ligne++)" in sides["dan"]["text"]
    # The table says the same on the terminal.
    assert "ana" in r.stdout and "dan" in r.stdout and "2 pairs above the threshold" in r.stdout


def test_a_lower_threshold_lists_more_and_the_markdown_report_holds_the_passages(tmp_path: Path) -> None:
    r = idrrun("similarity", "loops_matvec", *klass(tmp_path), "--threshold", "50%",
               "--report", str(tmp_path / "s.md"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (tmp_path / "s.md").read_text()
    # ben's near miss shares about half of his own code with the solution: listed at 50 %.
    assert "| ben | the published solution (C/loops_matvec_solution.c) |" in text, text
    assert "## ana and dan: 100 % and 100 %" in text
    assert "ana, lines 2" in text and "```c\n" in text
    r = idrrun("similarity", "loops_matvec", *klass(tmp_path), "--threshold", "1.5", cwd=tmp_path)
    assert r.returncode == 2 and "at most 1" in r.stderr
    r = idrrun("similarity", "loops_matvec", *klass(tmp_path), "--report", "x.csv", cwd=tmp_path)
    assert r.returncode == 2 and "use a .md or .json" in r.stderr


def test_directives_are_code_and_nothing_moves() -> None:
    c = "int x;\n  #  pragma acc parallel loop\n#pragma omp target\n"
    assert similarity.normalised(c, "c") == "int x;\n" + " " * 12 + "acc parallel loop\n" + \
        " " * 8 + "omp target\n"
    f = "  !$ACC PARALLEL LOOP\nC$ACC DATA\n  X = 1 ! a comment\n"
    out = similarity.normalised(f, "fortran")
    assert out == "    acc parallel loop\n  acc data\n  x = 1 ! a comment\n"
    assert len(out) == len(f)


def test_a_fortran_copy_in_capitals_is_the_same_code() -> None:
    start = (EXAMPLES / "Fortran" / "loops_matvec_exercise.f90").read_text()
    solution = (EXAMPLES / "Fortran" / "loops_matvec_solution.f90").read_text()
    docs = [similarity.Document("shouty", "fortran", solution.replace("sum", "total").upper()),
            similarity.Document("given", "fortran", start),
            similarity.Document("F/sol.f90", "fortran", solution, published=True),
            similarity.Document("cee", "c", SOLUTION_C)]  # never compared with Fortran
    result = similarity.compare(docs, {"fortran": start, "c": START_C})
    assert [(p.first.name, p.second.name) for p in result.pairs] == [("shouty", "F/sol.f90")]
    assert result.pairs[0].shares == (1.0, 1.0)
    assert result.unchanged == ("given",)


def test_a_students_backticks_do_not_end_the_reports_code_block() -> None:
    sneaky = SOLUTION_C.replace("/* |x| = 1 */", "/* ```\n# You are cleared\n``` */")
    docs = [similarity.Document("mallory", "c", sneaky),
            similarity.Document("C/sol.c", "c", SOLUTION_C, published=True)]
    text = similarity.render_markdown(similarity.compare(docs, {"c": START_C}), "loops_matvec")
    assert "````c\n" in text and "\n# You are cleared" in text
    assert "\n````\n" in text


def test_without_copydetect_the_command_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(similarity, "copydetect", None)
    with pytest.raises(UsageError, match=r"pip install 'idrrun\[similarity\]'"):
        similarity.compare([similarity.Document("a", "c", SOLUTION_C)], {"c": START_C})


def test_an_unreadable_submission_is_said_and_exits_1(tmp_path: Path) -> None:
    paths = klass(tmp_path)[:2]
    (tmp_path / "judy.ipynb").write_text("{ not json")
    r = idrrun("similarity", "loops_matvec", *paths, str(tmp_path / "judy.ipynb"), "--json",
               cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert [u["student"] for u in data["not_read"]] == ["judy"]
    assert [d["name"] for d in data["compared"]] == ["ana", "ben", "C/loops_matvec_solution.c"]


@pytest.mark.slow
def test_grading_the_class_writes_no_similarity_into_feedback(tmp_path: Path) -> None:
    """The class graded with feedback, then compared: the pairs are in the instructor's report
    only; each student's feedback names no one else and no share."""
    paths = klass(tmp_path)
    r = idrrun("grade", "loops_matvec", *paths, "-j", "2", "--report", str(tmp_path / "r.json"),
               "--feedback", str(tmp_path / "fb"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    verdicts = {row["student"]: row for row in json.loads((tmp_path / "r.json").read_text())}
    # Right, and every check a host can judge passed (the speed check needs a GPU).
    assert verdicts["ana"]["verdict"] == verdicts["eve"]["verdict"] == "incomplete", verdicts
    for right in ("ana", "eve"):
        assert verdicts[right]["reasons"] == ("every check this machine can evaluate passed; a GPU "
                                              "also evaluates: run time"), verdicts[right]
    assert "relative error is 3.237e+106" in verdicts["chloe"]["reasons"]  # wrong
    assert "vector lanes" in verdicts["ben"]["reasons"]  # a near miss
    assert "uses OpenACC" in verdicts["finn"]["reasons"]  # the start file
    r = idrrun("similarity", "loops_matvec", *paths, "--report", str(tmp_path / "s.md"), cwd=tmp_path)
    assert r.returncode == 0 and "## ana and dan" in (tmp_path / "s.md").read_text()
    assert sorted(p.name for p in (tmp_path / "fb").iterdir()) == [f"{s}.md" for s in STUDENTS]
    for feedback in (tmp_path / "fb").iterdir():
        text = feedback.read_text()
        others = [s for s in STUDENTS if s != feedback.stem and re.search(rf"\b{s}\b", text)]
        assert not others and "similar" not in text.lower() and "shares" not in text, text


def test_the_shares_are_copydetects_own() -> None:
    """idrrun gathers the shared places with numpy (grading/similarity.py _shares): the figures
    are those of copydetect's compare_files, pair by pair."""
    docs = [similarity.Document(p.stem, "c", p.read_text()) for p in sorted(CLASS.glob("*.c"))]
    docs.append(similarity.Document("sol", "c", SOLUTION_C, published=True))
    boilerplate = similarity._boilerplate(START_C, "c")
    prints = [similarity._print(d, boilerplate) for d in docs]
    theirs = [similarity._fingerprint(d, boilerplate) for d in docs]
    for (i, a), (j, b) in itertools.combinations(enumerate(prints), 2):
        shared, shares, _ = copydetect.compare_files(theirs[i], theirs[j])
        mine, in_common = similarity._shares(a, b)
        assert mine == tuple(float(s) for s in shares), (a.document.name, b.document.name)
        assert in_common <= int(shared)


# A renamed copy of the published solution: every name of its own changed (the solution adds
# about 40 lines to the start file).
RENAMED = {"A": "mat", "x": "vec", "y": "res", "nn": "cells", "x0": "first", "lambda": "eig",
           "it": "step", "i": "row", "j": "col", "sum": "acc", "xy": "dot", "yy": "norm2",
           "scale": "inv"}


def renamed(text: str) -> str:
    return re.sub(r"\b(" + "|".join(map(re.escape, RENAMED)) + r")\b",
                  lambda m: RENAMED[m.group(1)], text)


def test_code_hidden_in_a_folders_headers_is_the_students_code(tmp_path: Path) -> None:
    """What the compiler reads is compared: mallory's folder hands in a loops_matvec.c that only
    includes impl.h, which is ana's program; rene's includes <port.h> (the compile's -I is the
    folder), which includes inc/body.h, a renamed copy of the published solution. Both pairs
    are found, and the passages say in which file the shared lines are."""
    paths = klass(tmp_path)
    ana = (tmp_path / "class" / "ana.c").read_text()
    mallory, rene = tmp_path / "class" / "mallory", tmp_path / "class" / "rene"
    (mallory).mkdir()
    (mallory / "loops_matvec.c").write_text("/* my port */\n#include \"impl.h\"\n")
    (mallory / "impl.h").write_text(ana)
    (mallory / "notes.h").write_text(START_C)  # not included: not compiled, not compared
    (rene / "inc").mkdir(parents=True)
    (rene / "loops_matvec.c").write_text("#include <stdio.h>\n#include <port.h>\n")
    (rene / "port.h").write_text("#include \"inc/body.h\"\n")
    (rene / "inc" / "body.h").write_text(renamed(SOLUTION_C))
    # max's file is named by a macro: only the compiler knows which; the folder's files count.
    maxi = tmp_path / "class" / "max"
    (maxi / "deep").mkdir(parents=True)
    (maxi / "loops_matvec.c").write_text('#define IMPL "deep/impl.h"\n#include IMPL\n')
    (maxi / "deep" / "impl.h").write_text((tmp_path / "class" / "ben.c").read_text())
    assert "double *restrict mat = malloc" in renamed(SOLUTION_C)
    r = idrrun("similarity", "loops_matvec", *paths, str(mallory), str(rene), str(maxi),
               "--report", str(tmp_path / "s.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((tmp_path / "s.json").read_text())
    pairs = pairs_of(report)
    assert frozenset(("ana", "mallory")) in pairs, sorted(map(sorted, pairs))
    assert frozenset(("rene", "SOLUTION")) in pairs, sorted(map(sorted, pairs))
    assert frozenset(("ben", "max")) in pairs, sorted(map(sorted, pairs))
    for key in (frozenset(("ana", "mallory")), frozenset(("rene", "SOLUTION")),
                frozenset(("ben", "max"))):
        assert min(pairs[key]["shares"]) > 0.85, pairs[key]  # type: ignore[call-overload]
    assert "mallory" not in report["unchanged"] and "rene" not in report["unchanged"]
    mine = pairs[frozenset(("ana", "mallory"))]
    side = mine["passages"][0]["first" if mine["first"] == "mallory" else "second"]  # type: ignore[index]
    assert side["files"] == ["impl.h", "impl.h"], side
    body = pairs[frozenset(("rene", "SOLUTION"))]
    side = body["passages"][0]["first" if body["first"] == "rene" else "second"]  # type: ignore[index]
    assert side["files"][0] == "inc/body.h" and "#pragma acc data create(mat[0:cells]" in side["text"], side
    # The Markdown report names the header and its own line numbers.
    r = idrrun("similarity", "loops_matvec", *paths, str(mallory), "--report",
               str(tmp_path / "s.md"), cwd=tmp_path)
    assert re.search(r"mallory, impl\.h, lines \d+-\d+:", (tmp_path / "s.md").read_text())


def _renamed_everywhere(text: str, language: str) -> str:
    """Every variable and function name of the text (its directives' too) given another,
    consistently: a copy as a student who renamed all of them would hand it in. The names
    are those Pygments reads as names (not the language's intrinsics) in the text as it is
    compared (similarity.normalised keeps every offset)."""
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Name

    lexer = get_lexer_by_name(similarity._LEXERS[language])  # type: ignore[index]
    names = (Name, Name.Variable, Name.Attribute, Name.Function, Name.Class)
    seen: dict[str, str] = {}
    out, at = [], 0
    compared = similarity.normalised(text, language)  # type: ignore[arg-type]
    for start, kind, value in lexer.get_tokens_unprocessed(compared):
        if kind in names and re.fullmatch(r"[A-Za-z_]\w*", value):
            key = value.lower() if language == "fortran" else value
            out += [text[at:start], seen.setdefault(key, f"q{len(seen)}")]
            at = start + len(value)
    return "".join(out) + text[at:]


@pytest.mark.parametrize("language,folder,suffix", [("c", "C", ".c"), ("fortran", "Fortran", ".f90")])
def test_copies_of_every_published_solution_are_paired_where_it_adds_a_few_lines(
        language: str, folder: str, suffix: str) -> None:
    """Over the whole course: an exact copy of the published solution, and a copy with every
    name changed, are both paired with it wherever the solution adds at least MIN_SHARED of
    code of its own to the start file (about three lines). Below that (one directive added),
    honest answers are the solution itself: listing them would list the whole class."""
    below = []
    for solution in sorted((EXAMPLES / folder).glob(f"*_solution{suffix}")):
        start = solution.with_name(solution.name.replace("_solution", "_exercise")).read_text()
        text = solution.read_text()
        copies = [similarity.Document("exact", language, text),  # type: ignore[arg-type]
                  similarity.Document("renamed", language,  # type: ignore[arg-type]
                                      _renamed_everywhere(text, language)),
                  similarity.Document("sol", language, text, published=True)]  # type: ignore[arg-type]
        assert copies[1].text != text and "q0" in copies[1].text
        result = similarity.compare(copies, {language: start})
        own = similarity._print(copies[2], similarity._boilerplate(start, language)).coverage
        paired = {frozenset((p.first.name, p.second.name)) for p in result.pairs}
        if own < similarity.MIN_SHARED:
            below.append(solution.stem)
            continue
        assert {frozenset(("exact", "sol")), frozenset(("renamed", "sol"))} <= paired, solution.name
    # The exercises whose solution adds less (said here, so that a change is seen).
    assert below == {"c": ["intro_pi_solution", "variables_median_solution"],
                     "fortran": ["intro_pi_solution"]}[language]
