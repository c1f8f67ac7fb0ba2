"""Do Nsight Systems and the built-in tracer see the same GPU work? (issue 15) The same programs
profiled by both on the GPU machine, compared on the development machine.

    python3 benchmarks/nsys_check.py pack                    here: nsys's target part for there
    python3 benchmarks/nsys_check.py gpu [--toolchain-only]  there, with .gpu-nsys carried
    python3 benchmarks/nsys_check.py compare FOLDER [--for-tests]  here, FOLDER: that run's $OUT

The GPU machine has no nsys, no importer and no package registry, and the GCC toolchain and
nsys do not fit in one 64 MiB call (/opt stays between calls of a warm machine), so:
1. here, `pack` writes .gpu-nsys/nsys-target.tar.xz (git-ignored, ~23 MB: the target-linux-x64
   folder of Debian's nsight-systems, `docker/install.sh nsys`, without the CUPTI copies older
   than 11.8, which no driver there needs);
2. there, carrying .gpu: `source .gpu/activate.sh && python3 benchmarks/nsys_check.py gpu
   --toolchain-only` (the toolchain unpacked into /opt); then carrying .gpu-nsys: `python3
   benchmarks/nsys_check.py gpu`: it builds examples/C/async_matmul_solution.c (2000) and
   data_laplace_solution.c (4096 200) with gcc's nvptx offloading and runs each under the
   built-in tracer and under nsys with idrrun's own command line (nsys leaves RUN/report.qdstrm
   without an importer); $OUT (or ./gpu-out) gets check.log and nsys-check.tar.xz in 15 MB parts
   (files of at most 16 MiB come back): LABEL.trace.jsonl, LABEL.qdstrm, LABEL.output.txt,
   gpu.txt. About a minute. Sizes: --async, --laplace.
3. here, `compare FOLDER`: imports the .qdstrm files (QdstrmImporter), reads them as idrrun does
   (nsys export -> nsysdb) and compares them with the tracer's traces: kernel and copy counts and
   bytes equal, kernel and copy times within 5 % (totals under 1 ms shown, not held to it: their
   jitter is larger); nsys's own stats must give the export's totals. A table; exit 1 when the
   profilers disagree. --for-tests also writes, for the async run, the tables nsysdb reads as
   tests/data/nsys-2022.4/gpu_async.sql and its tracer trace as gpu_async.trace.jsonl (for
   tests/test_nsys.py).
`gpu --host` runs step 2 on a machine without a GPU (host builds, small sizes, nsys from PATH):
it checks the driver, not the GPU.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun.profile import nsys as nsys_mod  # noqa: E402
from idrrun.profile import nsysdb  # noqa: E402
from idrrun.profile.model import Trace  # noqa: E402
from idrrun.profile.stages import plan  # noqa: E402
from idrrun.profile.summary import summarize  # noqa: E402
from idrrun.profile.tracefile import read_trace  # noqa: E402
from idrrun.run import proc  # noqa: E402

PACKED = bench.ROOT / ".gpu-nsys" / "nsys-target.tar.xz"
NSYS_THERE = Path("/opt/nsys-target/target-linux-x64")
GCC_THERE = Path("/opt/gcc-offload/usr")
DATA = bench.ROOT / "tests" / "data" / "nsys-2022.4"
TOLERANCE = 0.05
SMALL_NS = 1_000_000  # totals under 1 ms: shown, not held to the tolerance


def nsys_here() -> Path:
    found = shutil.which("nsys") or ("/usr/lib/nsight-systems/bin/nsys"
                                     if os.access("/usr/lib/nsight-systems/bin/nsys", os.X_OK) else None)
    if found is None:
        sys.exit("nsys_check: no nsys here: bash docker/install.sh nsys")
    return Path(found)


# ---------------------------------------------------------------------------------------------
# pack


def pack() -> list[str]:
    target = nsys_here().resolve().parent
    if target.name != "target-linux-x64":
        sys.exit(f"nsys_check pack: {target} is not a target-linux-x64 folder")
    PACKED.parent.mkdir(exist_ok=True)
    part = PACKED.with_suffix(".xz.part")
    with open(part, "wb") as out:
        tar = subprocess.Popen(["tar", "-C", str(target.parent), "--exclude=target-linux-x64/libcupti.so.10.*",
                                "--exclude=target-linux-x64/libcupti.so.11.[0-7]", "-cf", "-",
                                "target-linux-x64"], stdout=subprocess.PIPE)
        xz = subprocess.run(["xz", "-T0", "-6"], stdin=tar.stdout, stdout=out, check=False)
        if tar.wait() != 0 or xz.returncode != 0:
            sys.exit("nsys_check pack: tar | xz failed")
    part.rename(PACKED)
    version = subprocess.run([str(target / "nsys"), "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    (PACKED.parent / "version.txt").write_text(version + "\n")
    return [f"{PACKED.relative_to(bench.ROOT)}: {PACKED.stat().st_size / 1e6:.1f} MB, {version}",
            "carry .gpu-nsys (and, in a first call, .gpu: they do not fit in one call together)"]


# ---------------------------------------------------------------------------------------------
# gpu


def toolchain(host: bool) -> str:
    """GCC with nvptx offloading: activate.sh's, or what it unpacked in an earlier call (/opt's
    gcc first whenever it is there: what counts is its mkoffload)."""
    if (GCC_THERE / "bin" / "gcc-12").exists():
        os.environ["PATH"] = f"{GCC_THERE / 'bin'}:{os.environ['PATH']}"
        os.environ["LD_LIBRARY_PATH"] = ":".join(
            p for p in (str(GCC_THERE / "lib" / "x86_64-linux-gnu"), "/usr/local/cuda/lib64",
                        os.environ.get("LD_LIBRARY_PATH", "")) if p)
    if not host and not bench.has_offload():
        sys.exit("nsys_check gpu: no gcc with nvptx offloading: carry .gpu and start with "
                 "'source .gpu/activate.sh'")
    return subprocess.run(["gcc", "--version"], capture_output=True, text=True,
                          check=False).stdout.splitlines()[0]


def nsys_there(host: bool) -> Path:
    if host:
        return nsys_here()
    if not (NSYS_THERE / "nsys").exists():
        if not PACKED.exists():
            sys.exit("nsys_check gpu: no .gpu-nsys/nsys-target.tar.xz: run `nsys_check.py pack` "
                     "here and carry .gpu-nsys")
        NSYS_THERE.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-C", str(NSYS_THERE.parent), "-xJf", str(PACKED)], check=True)
    return NSYS_THERE / "nsys"


def qdstrm_of(run_dir: Path, output: str, started: float) -> Path | None:
    """Where nsys left its raw file: RUN/report.qdstrm without an importer, else the
    temporary one its "Generating" line names."""
    if (run_dir / "report.qdstrm").is_file():
        return run_dir / "report.qdstrm"
    named = re.findall(r"Generating '([^']+\.qdstrm)'", output)
    if named and Path(named[-1]).is_file() and Path(named[-1]).stat().st_mtime >= started:
        return Path(named[-1])
    return None


def profile_both(label: str, exe: Path, args: list[str], expected: str, nsys: Path, stage: Path,
                 work: Path, failures: list[str]) -> None:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "idrrun"
    outputs = []
    p = plan("builtin", work / f"{label}-tracer", cache)
    if p.kind != "builtin":
        sys.exit(f"nsys_check gpu: no built-in tracer: {p.notes}")
    r = proc.run([str(exe), *args], what="run", timeout=300, spec=proc.ProcSpec(cwd=p.run_dir, env={**os.environ, **p.env}))
    outputs.append(f"== tracer: {r.describe()}\n{r.output}")
    if not r.ok or expected not in r.output:
        failures.append(f"{label} under the tracer: {r.describe()}, {expected!r} not printed")
    trace = read_trace(p.output) if p.output else None
    if trace is not None and p.output is not None:
        shutil.copyfile(p.output, stage / f"{label}.trace.jsonl")
        s = summarize(trace)
        print(f"{label} {' '.join(args)}, tracer: {s.kernel_count} kernels {s.kernel_ns / 1e6:.3f} ms, "
              f"h2d {s.h2d.count} x {s.h2d.bytes} B {s.h2d.total_ns / 1e6:.3f} ms, "
              f"d2h {s.d2h.count} x {s.d2h.bytes} B {s.d2h.total_ns / 1e6:.3f} ms")
    else:
        failures.append(f"{label}: the tracer wrote no trace")
    p = plan("nsys", work / f"{label}-nsys", cache, nsys_command=(str(nsys),))
    started = time.time()
    r = proc.run([*p.argv_prefix, str(exe), *args], what="run", timeout=600, spec=proc.ProcSpec(cwd=p.run_dir, env={**os.environ, **p.env}))
    outputs.append(f"== {' '.join(p.argv_prefix)}: {r.describe()}\n{r.output}")
    raw = qdstrm_of(p.run_dir, r.output, started)
    # where nsys has its importer (a dry run here), the report itself
    imported = p.run_dir / "report.nsys-rep"
    if raw is None and imported.is_file():
        raw = imported
    if expected not in r.output:
        failures.append(f"{label} under nsys: {r.describe()}, {expected!r} not printed")
    if raw is None:
        failures.append(f"{label}: nsys left no .qdstrm (output in {label}.output.txt)")
    else:
        kept = stage / f"{label}{raw.suffix}"
        shutil.move(str(raw), kept)
        print(f"{label}, nsys: {r.describe()}, {kept.stat().st_size / 1e6:.1f} MB {raw.suffix[1:]}")
    (stage / f"{label}.output.txt").write_text("\n".join(outputs))


def gpu(args: argparse.Namespace) -> tuple[list[str], bool]:
    compiler = toolchain(args.host)
    if args.toolchain_only:
        return [f"toolchain ready: {compiler} (/opt stays for the next call)"], True
    nsys = nsys_there(args.host)
    out = Path(os.environ.get("OUT") or Path.cwd() / "gpu-out")
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix="nsys-check-"))
    work = stage / "work"
    work.mkdir()
    os.environ.setdefault("XDG_CACHE_HOME", "/tmp/idrrun-gpu-cache")
    name = bench.gpu_name() or "no GPU (--host)"
    (stage / "gpu.txt").write_text(f"{name}\n{time.strftime('%Y-%m-%d %H:%M')}\n")
    version = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, check=False).stdout
    print(f"GPU: {name}; {compiler}; {version.strip()}")
    failures: list[str] = []
    runs = (("async", "async_matmul_solution.c", args.async_args or ("200" if args.host else "2000"), "C[0] = 42"),
            ("laplace", "data_laplace_solution.c", args.laplace or ("256 50" if args.host else "4096 200"), "error"))
    for label, source, program_args, expected in runs:
        exe = work / label
        bench.build_acc(bench.EXAMPLES / "C" / source, exe, gpu=not args.host)
        profile_both(label, exe, program_args.split(), expected, nsys, stage, work, failures)
    shutil.rmtree(work)
    for old in out.glob("nsys-check.tar.xz.part-*"):
        old.unlink()
    tar = subprocess.Popen(["tar", "-C", str(stage), "-cf", "-", "."], stdout=subprocess.PIPE)
    xz = subprocess.Popen(["xz", "-T0", "-6"], stdin=tar.stdout, stdout=subprocess.PIPE)
    subprocess.run(["split", "-b", "15M", "-", str(out / "nsys-check.tar.xz.part-")], stdin=xz.stdout,
                   check=True)
    tar.wait()
    xz.wait()
    shutil.rmtree(stage)
    parts = sorted(out.glob("nsys-check.tar.xz.part-*"))
    if len(parts) > 7:
        failures.append(f"{len(parts)} parts: more than 7 files do not come back; lower the sizes")
    lines = [f"GPU {name}: both profilers ran on async ({runs[0][2]}) and laplace ({runs[1][2]}); "
             f"{len(parts)} parts in {out}"]
    lines += [f"FAIL: {f}" for f in failures] or ["now on the development machine: "
                                                   "python3 benchmarks/nsys_check.py compare FOLDER"]
    return lines, not failures


# ---------------------------------------------------------------------------------------------
# compare


def close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b)) if (a or b) else True


def record_async(database: Path, work: Path) -> None:
    """The tables nsysdb reads (kernels, copies, syncs, GPU; not the machine's process list), for
    tests/test_nsys.py, and the tracer's trace of the same run."""
    tables_read = ("StringIds", "TARGET_INFO_GPU", nsysdb.KERNELS, nsysdb.COPIES, nsysdb.MEMSETS,
                   nsysdb.SYNCS, "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_CUPTI_SYNC_TYPE")
    lines = ["-- nsys 2022.4 on the GPU machine, imported and exported here "
             "(benchmarks/nsys_check.py compare --for-tests): the tables nsysdb.py reads"]
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
    (DATA / "gpu_async.trace.jsonl").write_text((work / "async.trace.jsonl").read_text())
    print(f"recorded {DATA / 'gpu_async.sql'} and {DATA / 'gpu_async.trace.jsonl'}")


def compare(args: argparse.Namespace) -> tuple[list[str], bool]:
    nsys = nsys_here()
    importer = nsys.resolve().parent.parent / "host-linux-x64" / "QdstrmImporter"
    if not os.access(importer, os.X_OK):
        importer = Path("/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter")
    if not os.access(importer, os.X_OK):
        sys.exit(f"nsys_check compare: no QdstrmImporter beside {nsys}")
    parts = sorted(args.folder.glob("nsys-check.tar.xz.part-*"))
    if not parts:
        sys.exit(f"nsys_check compare: no {args.folder}/nsys-check.tar.xz.part-*")
    work = Path(tempfile.mkdtemp(prefix="nsys-import-"))
    cat = subprocess.Popen(["cat", *map(str, parts)], stdout=subprocess.PIPE)
    xz = subprocess.Popen(["xz", "-d"], stdin=cat.stdout, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-C", str(work), "-xf", "-"], stdin=xz.stdout, check=True)
    cat.wait()
    xz.wait()
    print(f"GPU run of {' '.join((work / 'gpu.txt').read_text().split())}")
    for raw in sorted(work.glob("*.qdstrm")):
        r = subprocess.run([str(importer), "-f", "-i", str(raw)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            sys.exit(f"nsys_check compare: import of {raw} failed:\n{r.stdout}{r.stderr}")
    failures: list[str] = []
    rows: list[tuple[str, ...]] = []
    names = nsys_mod.report_names(proc.run([str(nsys), "stats", "--help-reports"], what="probe",
                                           timeout=60).output)
    for report in sorted(work.glob("*.nsys-rep")):
        label = report.stem
        database = report.with_suffix(".sqlite")
        r = proc.run(nsys_mod.export_argv(str(nsys), report, database), what="profile export", timeout=600)
        read = nsysdb.read_trace(database)
        if not isinstance(read, Trace):
            failures.append(f"{label}: {read} ({r.describe()})")
            continue
        tracer = read_trace(work / f"{label}.trace.jsonl")
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
        stats_dir = work / f"{label}-stats"
        stats_dir.mkdir()
        s = proc.run(nsys_mod.stats_argv(str(nsys), database, names, stats_dir), what="profile stats", timeout=600, spec=proc.ProcSpec(cwd=stats_dir))
        tables = nsys_mod.read_stats(stats_dir, names)
        from_csv = nsys_mod.summary_from_tables(tables)
        if not b.kernel_count and not tables:
            rows.append((label, "stats", "no GPU data", "no GPU data", "", "ok"))  # a host run
        elif from_csv is None or (from_csv.kernel_ns, from_csv.kernel_count) != (b.kernel_ns, b.kernel_count):
            failures.append(f"{label}: nsys stats ({', '.join(t.report for t in tables.values())}) "
                            f"disagree with the export: {from_csv} ({s.describe()})")
        else:
            rows.append((label, f"stats {names['kernels']}", str(from_csv.kernel_ns), str(b.kernel_ns), "", "ok"))
        if args.for_tests and label == "async":
            if read.kernels:
                record_async(database, work)
            else:
                print("nothing recorded: the async run has no GPU activity")
    shutil.rmtree(work, ignore_errors=True)
    header = ("run", "what", "tracer", "nsys", "nsys - tracer", "")
    width = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, width)).rstrip() for row in [header, *rows]]
    lines += [f"FAIL: {f}" for f in failures] or [
        f"the profilers agree (counts and bytes exactly, times of 1 ms or more within {TOLERANCE:.0%})"]
    return lines, not failures


def main() -> int:
    p = bench.parser(__doc__, record=False)
    add = bench.subcommands(p)
    add("pack", "Here: nsys's target part packed for the GPU machine (.gpu-nsys/).")
    sub = add("gpu", "There: the programs under the tracer and under nsys; the raw files to $OUT.")
    sub.add_argument("--toolchain-only", action="store_true",
                     help="only make sure the GCC toolchain is in /opt (a first call, carrying .gpu)")
    sub.add_argument("--host", action="store_true", help="host builds, small sizes, nsys from PATH")
    sub.add_argument("--async", dest="async_args", help="async_matmul's argument (default 2000)")
    sub.add_argument("--laplace", help="data_laplace's arguments (default '4096 200')")
    sub = add("compare", "Here: the GPU run's raw files imported and compared with the tracer's.")
    sub.add_argument("folder", type=Path, help="the GPU run's $OUT (its files_at)")
    sub.add_argument("--for-tests", action="store_true",
                     help="also keep the async run for tests/test_nsys.py (tests/data/nsys-2022.4)")
    args = p.parse_args()
    if args.command == "pack":
        bench.report("nsys packed for the GPU machine", pack(), record=False)
        return 0
    lines, ok = gpu(args) if args.command == "gpu" else compare(args)
    bench.report("nsys and the built-in tracer", lines, record=args.record)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
