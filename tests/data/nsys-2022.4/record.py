"""Records what Nsight Systems 2022.4 (Debian's nsight-systems, `docker/install.sh nsys`) writes,
for the tests that must run where nsys is missing. From the repository's root, with nsys on PATH:

    .venv/bin/python tests/data/nsys-2022.4/record.py

Writes, beside this file:
- version.txt           `nsys --version`
- help_reports.txt      `nsys stats --help-reports`: the report names of this generation
- profile_output.txt    a host OpenACC program's output under `nsys profile` as idrrun runs it,
                        as the notebook receives it (through a pty): nsys's "Generating" line and
                        progress bars, redrawn with carriage returns
- schema.sql            the definitions of the tables nsysdb.py reads, from `nsys export
                        --lazy=false` of that report (which makes every table, but leaves the
                        enumerations empty), and the rows of the enumerations, from the plain
                        export (which makes only the tables that have rows, and fills them)
- gpukernsum.csv, gpumemtimesum.csv, gpumemsizesum.csv
                        `nsys stats --format csv` of an export holding the operations of the
                        built-in tracer's H200 trace (tests/data/async_trace_h200.jsonl, through
                        tests/nsys_export.py): this generation's CSV, written by nsys's own scripts
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
from contextlib import closing
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from idrrun.profile import stages as session  # noqa: E402
from idrrun.profile.tracefile import read_trace  # noqa: E402
from idrrun.run import proc  # noqa: E402
import nsys_export  # noqa: E402

PROGRAM = (HERE.parent / "acc_sum.c").read_text()  # the tests' small OpenACC program
TABLES = ("StringIds", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
          "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
          "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_CUPTI_SYNC_TYPE")
STATS = ("gpukernsum", "gpumemtimesum", "gpumemsizesum")


def must(result: proc.ProcResult) -> proc.ProcResult:
    if not result.ok:
        sys.exit(f"{result.describe()}:\n{result.output}")
    return result


def schema(export: Path) -> str:
    """CREATE statements of TABLES, and the rows of the ENUM_ ones, from a real export."""
    out = ["-- Nsight Systems 2022.4: tables from `nsys export --type sqlite --lazy=false`, "
           "enumerations from `nsys export --type sqlite` (record.py)"]
    with closing(sqlite3.connect(export)) as db:
        for table in TABLES:
            (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            out.append(sql + ";")
            if table.startswith("ENUM_"):
                for row in db.execute(f"SELECT * FROM {table}"):
                    out.append(f"INSERT INTO {table} VALUES ({', '.join(map(_sql, row))});")
    return "\n".join(out) + "\n"


def _sql(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def main() -> None:
    nsys = shutil.which("nsys")
    if nsys is None:
        sys.exit("no nsys on PATH (docker/install.sh nsys installs Debian's)")
    (HERE / "version.txt").write_text(must(proc.run([nsys, "--version"], what="probe",
                                                    timeout=30)).output)
    # exits with status 1 in 2022.4, having listed the reports
    (HERE / "help_reports.txt").write_text(proc.run([nsys, "stats", "--help-reports"],
                                                    what="probe", timeout=60).output)
    work = Path(tempfile.mkdtemp(prefix="nsys-record-"))
    source = work / "host_acc.c"
    source.write_text(PROGRAM)
    program = work / "host_acc"
    must(proc.run(["gcc", "-O1", "-fopenacc", "-foffload=disable", "-o", str(program), str(source)],
                  what="compile", timeout=120))
    plan = session.plan("nsys", work / "run", work / "cache")
    run = must(proc.run([*plan.argv_prefix, str(program)], what="run", timeout=300,
                        spec=proc.ProcSpec(cwd=work, terminal=True, env=dict(os.environ))))
    (HERE / "profile_output.txt").write_text(run.output.replace(str(work), "/tmp/nsys-record"))
    assert plan.output is not None
    full, lazy = work / "full.sqlite", work / "lazy.sqlite"
    for database, options in ((full, ["--lazy=false"]), (lazy, [])):
        must(proc.run([nsys, "export", "--type", "sqlite", *options, "--force-overwrite=true",
                       "-o", str(database), str(plan.output)], what="profile export", timeout=300))
    with closing(sqlite3.connect(full)) as db:
        db.execute("ATTACH DATABASE ? AS lazy", (str(lazy),))
        for table in TABLES:
            if table.startswith("ENUM_"):
                db.execute(f"INSERT INTO main.{table} SELECT * FROM lazy.{table}")
        db.commit()
    (HERE / "schema.sql").write_text(schema(full))

    trace = read_trace(ROOT / "tests" / "data" / "async_trace_h200.jsonl")
    assert trace is not None
    database = nsys_export.write(trace, work / "h200.sqlite", base=full)
    must(proc.run([nsys, "stats", "--format", "csv", "--output", str(work / "stats"),
                   "--report", ",".join(STATS), str(database)], what="profile stats", timeout=300))
    for report in STATS:
        shutil.copyfile(work / f"stats_{report}.csv", HERE / f"{report}.csv")
    shutil.rmtree(work)
    print(f"recorded into {HERE}")


if __name__ == "__main__":
    main()
