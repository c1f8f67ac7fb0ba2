"""What the annotated source costs a `--check` cell (issue 26: a 300-line source with its
remarks in at most 20 ms).

    python3 benchmarks/annotate_cost.py [--lines 300] [--rounds 200]

A generated C source of about LINES lines (compute regions with and without data clauses, a data
region, updates, nested loops, a few warnings), compiled once here with the checked build's gcc
flags (-fopt-info-optimized-omp and the tree dumps; for the host). Then, medians of ROUNDS, ms:
- annotate: annotate.annotate on the build's output and the AccReport read from the dumps (the
  compiler's messages parsed, every remark explained, the failed checks placed);
- annotate + render: that, then the three forms a listing takes (the notebook's HTML, the
  terminal's text, the feedback file's Markdown);
- for comparison, reading gcc's dumps into the AccReport (toolchains.gccdumps, which a checked
  cell does anyway for its checks), and the same annotate on -Minfo text (nvhpc) of as many
  regions, from tests/data/minfo/jacobi.minfo repeated down the source.
Target: annotate + render within 20 ms.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun import annotate  # noqa: E402
from idrrun.display import AnnotatedView  # noqa: E402
from idrrun.model import CheckResult  # noqa: E402
from idrrun.toolchains import diagnostics, gcc  # noqa: E402
from idrrun.toolchains.gccdumps import GCC_DUMP_FLAGS, from_gcc_dumps  # noqa: E402
from idrrun.toolchains.minfo import from_nvhpc_minfo  # noqa: E402

TARGET_MS = 20.0
NAME = "cell[4]"

HEAD = """\
#include <stdio.h>
#include <stdlib.h>

static double grid[64][64];
"""
# One kernel: about 20 lines, three regions (one with no data clause), a data region, an update.
KERNEL = """\
double step{k}(double *a, double *b, int n)
{{
    double total = 0.0;
    int unused{k};
    #pragma acc data copyin(a[0:n]) create(b[0:n])
    {{
    #pragma acc parallel loop present(a[0:n], b[0:n])
    for (int i = 0; i < n; i++)
        b[i] = 0.5 * a[i] + {k};
    #pragma acc parallel loop reduction(+:total)
    for (int i = 0; i < n; i++)
        total += b[i];
    #pragma acc update self(b[0:n])
    }}
    #pragma acc parallel loop gang
    for (int i = 0; i < 64; i++) {{
        #pragma acc loop vector
        for (int j = 0; j < 64; j++) grid[i][j] += i * j + {k};
    }}
    return total;
}}
"""
TAIL = """\
int main(int argc, char **argv)
{{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), sum = 0.0;
    for (int i = 0; i < n; i++) a[i] = i;
{calls}    printf("sum = %g\\n", sum);
    return 0;
}}
"""


def generate(lines: int) -> str:
    """About `lines` lines: as many kernels as fit, comment lines up to the count."""
    kernels = max(1, (lines - 15) // (KERNEL.count("\n") + 1))
    body = "".join(KERNEL.format(k=k) for k in range(kernels))
    calls = "".join(f"    sum += step{k}(a, b, n);\n" for k in range(kernels))
    text = HEAD + body + TAIL.format(calls=calls)
    missing = lines - text.count("\n")
    return HEAD + "".join(f"/* {i} */\n" for i in range(max(0, missing))) + body + \
        TAIL.format(calls=calls)


def compile_checked(text: str, folder: Path) -> tuple[str, tuple[str, str, str]]:
    """The build's output as a cell shows it, and gcc's three dumps."""
    compiler = shutil.which("gcc")
    if compiler is None:
        sys.exit("annotate_cost: no gcc on PATH")
    (folder / "source.c").write_text(text)
    r = subprocess.run([compiler, "-O2", "-Wall", "-fopenacc", "-foffload=disable",
                        *gcc.FEEDBACK_FLAGS, *GCC_DUMP_FLAGS, "-o", "prog", "source.c"],
                       cwd=folder, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"annotate_cost: gcc failed:\n{r.stderr[-2000:]}")
    dumps = tuple(next(folder.glob(f"*.{kind}")).read_text() for kind in ("original", "gimple",
                                                                           "cgraph"))
    return diagnostics.rename_temporary(r.stderr, "source.c", NAME), dumps  # type: ignore[return-value]


def minfo_like(lines: int) -> str:
    """-Minfo text with as many regions as the generated source: the recorded jacobi text's
    messages, their line numbers moved down the source block by block."""
    recorded = (bench.ROOT / "tests" / "data" / "minfo" / "jacobi.minfo").read_text()
    out = []
    for block in range(max(1, lines // 40)):
        for line in recorded.splitlines():
            head, sep, rest = line.partition(",")
            if sep and head.strip().isdigit():
                line = head.replace(head.strip(), str(int(head.strip()) + 40 * block)) + sep + rest
            out.append(line)
    return "\n".join(out) + "\n"


def main() -> int:
    p = bench.parser(__doc__)
    p.add_argument("--lines", type=int, default=300, help="lines of the generated source (300)")
    p.add_argument("--rounds", type=int, default=200, help="timed calls of each step (200)")
    args = p.parse_args()
    text = generate(args.lines)
    folder = Path(tempfile.mkdtemp(prefix="idrrun-annotate-"))
    try:
        output, dumps = compile_checked(text, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    read, report = bench.timed(lambda: from_gcc_dumps(*dumps), args.rounds)
    first_regions = [r.line for r in report.remarks if r.kind == "implicit"][:3]
    checks = tuple(CheckResult("data clauses", "fail", reason="a is moved implicitly", line=line)
                   for line in first_regions)

    def annotated() -> annotate.Listing:
        return annotate.annotate(text, NAME, "c", 2, output, report, checks)

    def rendered() -> tuple[str, str, str]:
        listing = annotated()
        return AnnotatedView(listing)._repr_html_(), annotate.text(listing), annotate.markdown(listing)

    alone, listing = bench.timed(annotated, args.rounds)
    whole, _ = bench.timed(rendered, args.rounds)
    minfo = minfo_like(len(text.splitlines()))
    nv_report = from_nvhpc_minfo(minfo)
    nvhpc, nv_listing = bench.timed(lambda: annotate.annotate(text, NAME, "c", 2, minfo, nv_report,
                                                              checks), args.rounds)
    print(f"source: {len(text.splitlines())} lines; gcc: {len(output.splitlines())} lines of "
          f"output, {len(report.remarks)} remarks from its dumps; listing: {listing.notes} notes")
    verdict = "within" if whole * 1000 <= TARGET_MS else "OVER"
    bench.report(f"annotated source, {len(text.splitlines())} lines (median of {args.rounds}, ms)", [
        f"annotate                         {alone * 1000:7.2f}   ({listing.notes} notes)",
        f"annotate + HTML, text, Markdown  {whole * 1000:7.2f}   ({verdict} the {TARGET_MS:g} ms target)",
        f"reading gcc's dumps (for checks) {read * 1000:7.2f}",
        f"annotate on -Minfo text (nvhpc)  {nvhpc * 1000:7.2f}   ({nv_listing.notes} notes)",
    ], record=args.record)
    return 0 if whole * 1000 <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
