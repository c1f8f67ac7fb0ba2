"""annotate: the student's source with the compiler's messages, remarks and failed checks on
their lines, from hand-made values (no compiler); its Markdown, text and HTML."""

from __future__ import annotations

import io

from idrrun import annotate
from idrrun.display import AnnotatedView, TextReporter
from idrrun.model import AccReport, CheckResult, Remark

SOURCE = """\
#include <stdio.h>
int main(void) {
    double a[100];
    #pragma acc parallel loop
    for (int i = 0; i < 100; i++) a[i] = i;
    printf("%g\\n", a[99]);
    return undefined;
}
"""
# As the build shows it: the cell's name, the cell's lines (its magic line is 1).
OUTPUT = """\
cell[3]: In function ‘main’:
cell[3]:5:13: optimized: assigned OpenACC gang vector loop parallelism
cell[3]:8:12: error: ‘undefined’ undeclared (first use in this function)
    8 |     return undefined;
      |            ^~~~~~~~~
cell[3]:8:12: note: each undeclared identifier is reported only once for each function it appears in
In file included from cell[3]:2:
inc.h:1:1: warning: data definition has no type or storage class
"""
ACC = AccReport(1, (), "gcc", remarks=(
    Remark(5, "copy(a) added by the compiler", "a: copied to the device when the region starts, "
           "and back when it ends, because no data clause names it (the compiler adds copy)",
           "implicit"),
    Remark(5, "OpenACC parallel region", "gcc made a compute region of this construct: its code "
           "runs on the device", "region"),
    Remark(99, "beyond the source", "left out", "remark")))
CHECKS = (CheckResult("data clauses", "fail", reason="a is used without a data clause", line=5),
          CheckResult("n (hidden run 1)", "fail", reason="n is 3", line=5, hidden=1),
          CheckResult("ends normally", "pass", line=6))


def listing() -> annotate.Listing:
    return annotate.annotate(SOURCE, "cell[3]", "c", 2, OUTPUT, ACC, CHECKS)


def test_notes_are_placed_on_their_lines_worst_first() -> None:
    lines = {line.number: line for line in listing().lines}
    assert lines[2].code == "#include <stdio.h>" and lines[9].code == "}"
    kinds = [(n.kind, n.text) for n in lines[5].notes]
    assert kinds == [("check", "data clauses: a is used without a data clause"),
                     ("implicit", "copy(a) added by the compiler"),
                     ("region", "OpenACC parallel region"),
                     ("loop", "assigned OpenACC gang vector loop parallelism")]
    loop = lines[5].notes[-1]
    assert loop.meaning.endswith("spread over gangs and vectors")
    # The region's meaning gives way to the loop's, which says how it runs.
    assert lines[5].notes[2].meaning == ""
    assert [(n.kind, n.text[:11]) for n in lines[8].notes] == [("error", "‘undefined’"),
                                                              ("note", "each undecl")]
    assert not lines[6].notes and not lines[7].notes  # a passing check, never a hidden one


def test_messages_about_other_files_and_the_source_s_lines() -> None:
    shown = listing()
    assert [(d.file, d.line, d.severity) for d in shown.elsewhere] == [("inc.h", 1, "warning")]
    assert [(d.line, d.severity, d.code) for d in shown.diagnostics] == [
        (8, "error", "    return undefined;"), (8, "note", "    return undefined;")]


def test_the_markdown_listing() -> None:
    text = annotate.markdown(listing())
    assert text.startswith("```c\n") and text.endswith("```\n")
    assert "\n5      #pragma acc parallel loop\n" \
           "       // ^ check failed: data clauses: a is used without a data clause\n" \
           "       // ^ implicit data: copy(a) added by the compiler\n" \
           "       //   a: copied to the device when the region starts" in text, text
    assert "\n8      return undefined;\n       // ^ error: ‘undefined’ undeclared" in text
    assert "inc.h:1: warning: data definition has no type" in text
    # Lines far from every note are left out; a gap says so.
    far = annotate.annotate("\n".join(f"x = {i};" for i in range(30)), "f.c", "c", 1, "",
                            AccReport(0, (), "gcc", remarks=(Remark(3, "r"), Remark(20, "s"))))
    rows = annotate.text(far).splitlines()
    assert [r.split()[0] for r in rows] == ["2", "3", "//", "4", "⋮", "19", "20", "//", "21"]
    # A source with backticks gets a longer fence; Fortran's notes are Fortran comments.
    fortran = annotate.annotate("print *, '```'\n", "f.f90", "fortran", 1, "",
                                AccReport(0, (), "gcc", remarks=(Remark(1, "hello"),)))
    said = annotate.markdown(fortran)
    assert said.startswith("````fortran\n") and "  ! ^ compiler: hello" in said
    assert annotate.markdown(annotate.annotate("int x;\n", "f.c", "c", 1, "", None)) == ""


def test_the_notebook_s_html_and_the_terminal_s_text() -> None:
    view = AnnotatedView(listing())
    assert view.title() == ("cell[3], annotated: 1 error, 1 warning, 1 failed check, 1 implicit "
                            "data movement, 3 remarks")
    page = view._repr_html_()
    assert "<details class='idrrun-annotated' open>" in page
    assert "<tr class='idrrun-note idrrun-note-loop' data-line='5'>" in page
    assert "&lt;stdio.h&gt;" not in page  # only the lines near a note
    assert "‘undefined’ undeclared" in page
    quiet = annotate.annotate(SOURCE, "cell[3]", "c", 2, "", AccReport(1, (), "gcc", remarks=(
        Remark(5, "OpenACC parallel region", "made", "region"),)))
    assert "<details class='idrrun-annotated'>" in AnnotatedView(quiet)._repr_html_()
    out = io.StringIO()
    TextReporter(out, color=True, sanitize=True).annotated(annotate.annotate(
        "int x;\n/* \x1b]0;pwned\x07 */ int y;\n", "f.c", "c", 1, "", AccReport(0, (), "gcc", remarks=(
            Remark(2, "here"),))))
    assert "\x1b]0" not in out.getvalue() and "\\x1b]0;pwned" in out.getvalue()
    assert "\x1b[2m" in out.getvalue()  # the notes dimmed, the code as it is
