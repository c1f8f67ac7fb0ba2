#!/usr/bin/env bash
# Back on the CPU machine, after benchmarks/nsys_check_gpu.sh ran on the GPU machine: imports the
# .qdstrm files nsys left there (QdstrmImporter of Debian's nsight-systems, docker/install.sh
# nsys), reads them as idrrun does (nsys export -> nsysdb) and compares them with the built-in
# tracer's traces of the same programs: kernel and copy counts and bytes equal, kernel and copy
# times within 5 % (times under 1 ms in total, such as a few 8-byte copies, are shown but not
# held to it: their jitter from run to run is larger); nsys's own stats (2022.4's gpukernsum,
# ...) must give the export's totals.
#   bash benchmarks/nsys_check_import.sh FOLDER [--record]
# FOLDER holds nsys-check.tar.xz.part-* (the run's files_at). --record also writes, for the async
# run, the tables nsysdb reads (kernels, copies, syncs, GPU; not the machine's process list) as
# tests/data/nsys-2022.4/gpu_async.sql, and its tracer trace as gpu_async.trace.jsonl, for tests.
# Prints a table; exits 1 when the profilers disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:?usage: nsys_check_import.sh FOLDER [--record]}
record=${2:-}

nsys=$(command -v nsys || true)
[[ -n $nsys ]] || { [[ -x /usr/lib/nsight-systems/bin/nsys ]] && nsys=/usr/lib/nsight-systems/bin/nsys; }
[[ -n $nsys ]] || { echo "nsys_check_import: no nsys here: bash docker/install.sh nsys" >&2; exit 1; }
importer=$(dirname "$(readlink -f "$nsys")")/../host-linux-x64/QdstrmImporter
[[ -x $importer ]] || importer=/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter
[[ -x $importer ]] || { echo "nsys_check_import: no QdstrmImporter beside $nsys" >&2; exit 1; }

work=$(mktemp -d /tmp/nsys-import-XXXXXX)
trap 'rm -rf "$work"' EXIT
compgen -G "$folder/nsys-check.tar.xz.part-*" >/dev/null \
  || { echo "nsys_check_import: no $folder/nsys-check.tar.xz.part-*" >&2; exit 1; }
cat "$folder"/nsys-check.tar.xz.part-* | xz -d | tar -C "$work" -xf -
echo "nsys_check_import: GPU run of $(tr '\n' ' ' <"$work/gpu.txt")"
for raw in "$work"/*.qdstrm; do
  "$importer" -f -i "$raw" >"${raw%.qdstrm}.import.log" 2>&1 \
    || { cat "${raw%.qdstrm}.import.log"; echo "nsys_check_import: import of $raw failed" >&2; exit 1; }
done

NSYS=$nsys WORK=$work RECORD=$record PYTHONPATH=$PWD:$PWD/tests${PYTHONPATH:+:$PYTHONPATH} python3 - <<'PY'
import os
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from idrrun.profile import nsys as nsys_mod
from idrrun.profile import nsysdb
from idrrun.profile.model import Trace
from idrrun.profile.summary import summarize
from idrrun.profile.tracefile import read_trace
from idrrun.run import proc

NSYS, WORK, RECORD = os.environ["NSYS"], Path(os.environ["WORK"]), os.environ["RECORD"] == "--record"
DATA = Path("tests/data/nsys-2022.4")
TOLERANCE = 0.05
SMALL_NS = 1_000_000  # totals under 1 ms: shown, not held to the tolerance
failures: list[str] = []
rows: list[tuple[str, ...]] = []


def close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b)) if (a or b) else True


names = nsys_mod.report_names(proc.run([NSYS, "stats", "--help-reports"], what="probe",
                                       timeout=60).output)
for report in sorted(WORK.glob("*.nsys-rep")):
    label = report.stem
    database = report.with_suffix(".sqlite")
    r = proc.run(nsys_mod.export_argv(NSYS, report, database), what="profile export", timeout=600)
    read = nsysdb.read_trace(database)
    if not isinstance(read, Trace):
        failures.append(f"{label}: {read} ({r.describe()})")
        continue
    tracer = read_trace(WORK / f"{label}.trace.jsonl")
    if tracer is None:
        failures.append(f"{label}: no tracer trace")
        continue
    a, b = summarize(tracer), summarize(read)
    for what, x, y, exact in (
            ("kernels", a.kernel_count, b.kernel_count, True),
            ("kernel time (ns)", a.kernel_ns, b.kernel_ns, False),
            ("h2d copies", a.h2d.count, b.h2d.count, True),
            ("h2d bytes", a.h2d.bytes, b.h2d.bytes, True),
            ("h2d time (ns)", a.h2d.total_ns, b.h2d.total_ns, False),
            ("d2h copies", a.d2h.count, b.d2h.count, True),
            ("d2h bytes", a.d2h.bytes, b.d2h.bytes, True),
            ("d2h time (ns)", a.d2h.total_ns, b.d2h.total_ns, False),
            ("memsets", a.memset_count, b.memset_count, True)):
        small = not exact and max(x, y) < SMALL_NS
        ok = x == y if exact else (small or close(x, y))
        diff = f"{100 * (y - x) / x:+.1f} %" if x else ""
        rows.append((label, what, str(x), str(y), diff,
                     "ok" if ok and not (small and not close(x, y)) else "< 1 ms" if ok else "DIFFERS"))
        if not ok:
            failures.append(f"{label}: {what}: tracer {x}, nsys {y}")
    # nsys's own tables of the same export (this generation's names and columns)
    stats_dir = WORK / f"{label}-stats"
    stats_dir.mkdir()
    s = proc.run(nsys_mod.stats_argv(NSYS, database, names, stats_dir), what="profile stats",
                 timeout=600, spec=proc.ProcSpec(cwd=stats_dir))
    tables = nsys_mod.read_stats(stats_dir, names)
    from_csv = nsys_mod.summary_from_tables(tables)
    if not b.kernel_count and not tables:
        rows.append((label, "stats", "no GPU data", "no GPU data", "", "ok"))  # a host run
    elif from_csv is None or (from_csv.kernel_ns, from_csv.kernel_count) != (b.kernel_ns, b.kernel_count):
        failures.append(f"{label}: nsys stats ({', '.join(t.report for t in tables.values())}) "
                        f"disagree with the export: {from_csv} ({s.describe()})")
    else:
        rows.append((label, f"stats {names['kernels']}", str(from_csv.kernel_ns), str(b.kernel_ns),
                     "", "ok"))
    if RECORD and label == "async" and not read.kernels:
        print("nothing recorded: the async run has no GPU activity")
    elif RECORD and label == "async":
        tables_read = ("StringIds", "TARGET_INFO_GPU", nsysdb.KERNELS, nsysdb.COPIES,
                       nsysdb.MEMSETS, nsysdb.SYNCS, "ENUM_CUDA_MEMCPY_OPER",
                       "ENUM_CUDA_MEM_KIND", "ENUM_CUPTI_SYNC_TYPE")
        lines = ["-- nsys 2022.4 on the GPU machine, imported and exported here "
                 "(benchmarks/nsys_check_import.sh --record): the tables nsysdb.py reads"]
        with closing(sqlite3.connect(database)) as db:
            used = {i for (i,) in db.execute(
                f"SELECT demangledName FROM {nsysdb.KERNELS} UNION SELECT shortName FROM "
                f"{nsysdb.KERNELS} UNION SELECT mangledName FROM {nsysdb.KERNELS}")}
            for (table, sql) in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
                if table not in tables_read:
                    continue
                lines.append(sql + ";")
                for row in db.execute(f"SELECT * FROM {table}"):
                    if table == "StringIds" and row[0] not in used:
                        continue
                    values = ", ".join("NULL" if v is None else str(v) if isinstance(v, int)
                                       else "'" + str(v).replace("'", "''") + "'" for v in row)
                    lines.append(f"INSERT INTO {table} VALUES ({values});")
        (DATA / "gpu_async.sql").write_text("\n".join(lines) + "\n")
        (DATA / "gpu_async.trace.jsonl").write_text((WORK / "async.trace.jsonl").read_text())
        print(f"recorded {DATA / 'gpu_async.sql'} and {DATA / 'gpu_async.trace.jsonl'}")

width = [max(len(r[i]) for r in rows) for i in range(6)] if rows else []
header = ("run", "what", "tracer", "nsys", "nsys - tracer", "")
for row in [header, *rows]:
    print("  ".join(c.ljust(w) for c, w in zip(row, [max(w, len(h)) for w, h in zip(width, header)])))
print("\n" + ("FAIL:\n  " + "\n  ".join(failures) if failures
              else f"the profilers agree (counts and bytes exactly, times of 1 ms or more within {TOLERANCE:.0%})"))
sys.exit(1 if failures else 0)
PY
