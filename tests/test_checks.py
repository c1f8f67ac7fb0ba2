"""Each check on hand-built evidence: pass, fail and incomplete, with expected, got and why."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from idrrun.checks.evidence import Evidence, HostComparison
from idrrun.checks.verdict import CUT_SHORT, NO_GPU_HERE, NO_TRACE, evaluate_one
from idrrun.checks.specs import CheckSpec
from idrrun.model import (AccReport, BuildResult, ConstructRan, ImplicitData, ProcResult,
                          RegionsRan, RunResult)

BUILT = BuildResult(ok=True, command=("gcc",), proc=None, output="", cached=False, key="k",
                    build_dir=Path("/nonexistent"))
FAILED_BUILD = BuildResult(ok=False, command=("gcc",), proc=None, output="error", cached=False,
                           key="k", build_dir=None)


def ev(output: str = "", rc: int | None = 0, timed_out: bool = False, acc: AccReport | None = None,
       solution: str | None = None, source: str = "#pragma acc parallel\n", built: bool = True,
       compiled: str | None = None, regions: RegionsRan | None = None, ran: bool = True) -> Evidence:
    run = RunResult(("prog",), ProcResult(("prog",), rc, timed_out=timed_out, output=output),
                    regions=regions)
    return Evidence(source_text=source, language="c", build=BUILT if built else FAILED_BUILD,
                    run=run if built and ran else None, acc=acc, solution_output=solution,
                    solution_problem="" if solution is not None else "it crashed",
                    compiled_text=compiled, regions=regions)


def test_exit_ok() -> None:
    spec = CheckSpec("exit_ok", "exit")
    assert evaluate_one(spec, ev()).status == "pass"
    r = evaluate_one(spec, ev(rc=-11))
    assert (r.status, r.got) == ("fail", "killed by SIGSEGV")
    assert evaluate_one(spec, ev(rc=None, timed_out=True)).got == "timed out"
    r = evaluate_one(spec, ev(built=False))
    assert (r.status, r.reason) == ("fail", "the program did not build (see the compiler's messages)")


def test_exit_ok_says_how_the_program_ended_in_a_sentence() -> None:
    spec = CheckSpec("exit_ok", "exit")

    def said(**how: object) -> str:
        proc = ProcResult(("prog",), **how)  # type: ignore[arg-type]
        run = RunResult(("prog",), proc)
        return evaluate_one(spec, dataclasses.replace(ev(), run=run)).reason

    assert said(returncode=3) == "the program ended with exit code 3"
    assert said(returncode=-11) == "the program was killed by SIGSEGV"
    assert said(returncode=-9, limit="memory") == "the program was stopped at the memory limit"
    assert said(returncode=None, timed_out=True) == "the program did not end in time (it timed out)"
    assert said(returncode=-2, interrupted=True) == "the program was interrupted"
    assert said(returncode=None, interrupted=True, timed_out=True) == "the program was interrupted"
    # Not the program's doing: not judged (test_a_program_that_could_not_start_...).
    assert said(returncode=None, start_error="No such file or directory") == \
        "not judged: the program could not be started (No such file or directory), so it did not run"


def test_value_within_tolerance() -> None:
    spec = CheckSpec("value", "C[0]", pattern=r"C\[0\]\s*=\s*(\S+)", expected=42.0, abs_tol=1e-6)
    assert evaluate_one(spec, ev("C[0] = 42.000000\n")).status == "pass"
    r = evaluate_one(spec, ev("C[0] = 41.5\n"))
    assert (r.status, r.expected, r.got, r.reason) == (
        "fail", "42 (±1e-06, rel 1e-09)", "41.5", "C[0] is 41.5, expected 42")
    r = evaluate_one(spec, ev("nothing here\n"))
    assert (r.status, r.got) == ("fail", "not printed")
    assert evaluate_one(spec, ev("C[0] = nan\n")).status == "fail"
    fortran = CheckSpec("value", "x", pattern=r"x\s*=\s*(\S+)", expected=1.5e-3, rel_tol=1e-6)
    assert evaluate_one(fortran, ev("x = 0.15D-02\n")).status == "pass"


def test_line_exact_and_regex() -> None:
    assert evaluate_one(CheckSpec("line", "l", exact="converged"), ev("  converged \n")).status == "pass"
    assert evaluate_one(CheckSpec("line", "l", regex=r"^iter\w*\s*=\s*\d+"), ev("iterations = 5\n")).status == "pass"
    assert evaluate_one(CheckSpec("line", "l", exact="converged"), ev("diverged\n")).status == "fail"


def test_matches_solution() -> None:
    spec = CheckSpec("matches_solution", "error", pattern=r"error\s*=\s*(\S+)", rel_tol=1e-6)
    sol = "error = 1.0e-3\nerror = 2.0e-4\n"
    assert evaluate_one(spec, ev("error = 0.001\nerror = 0.0002\n", solution=sol)).status == "pass"
    r = evaluate_one(spec, ev("error = 0.001\nerror = 0.0003\n", solution=sol))
    assert (r.status, r.reason) == ("fail", "value 2 of 2 is 0.0003 where the solution prints 2.0e-4")
    assert r.excerpt == "  1 | error = 0.001\n> 2 | error = 0.0003"
    r = evaluate_one(spec, ev("error = 0.001\n", solution=sol))
    assert r.status == "fail" and r.reason == ("the solution prints a line 'error = <number>' twice, "
                                               "this program once")
    r = evaluate_one(spec, ev("error = 0.001\n", solution=None))
    assert (r.status, r.reason) == ("incomplete", "the solution could not be run: it crashed")


def test_uses_openacc() -> None:
    spec = CheckSpec("uses_openacc", "acc")
    r = evaluate_one(spec, ev(source="int main(void){}\n", acc=AccReport(0, (), "gcc")))
    assert r.status == "fail" and r.reason.startswith("the source has no OpenACC directive")
    # Directives in comments or disabled blocks are not directives.
    hidden = "// #pragma acc parallel loop\n#if 0\n#pragma acc kernels\n#endif\nint main(void){}\n"
    r = evaluate_one(spec, ev(source=hidden, acc=AccReport(1, (), "gcc")))
    assert r.status == "fail" and "comments and disabled #if blocks do not count" in r.reason
    # What the compiler read (its preprocessor output), when the build kept it, decides.
    r = evaluate_one(spec, ev(source=hidden, acc=AccReport(1, (), "gcc"),
                              compiled="#pragma acc parallel loop\nint main(void){}\n"))
    assert r.status == "pass"
    r = evaluate_one(spec, ev(acc=AccReport(0, (), "gcc")))
    assert r.status == "fail" and "no parallel/kernels/serial region" in r.reason
    assert evaluate_one(spec, ev(acc=AccReport(2, (), "gcc"))).status == "pass"


TWO_RAN = RegionsRan("counted", (ConstructRan(1000, 47, "main"), ConstructRan(1000, 55, "main")))
NONE_RAN = RegionsRan("counted", ())


def test_uses_openacc_counts_the_regions_that_ran() -> None:
    spec = CheckSpec("uses_openacc", "acc")
    r = evaluate_one(spec, ev(acc=AccReport(2, (), "gcc"), regions=TWO_RAN))
    assert (r.status, r.expected, r.got) == ("pass", "≥ 1 compute region run", "2")
    # The compiler made regions, none ran: in a function never called.
    r = evaluate_one(spec, ev(acc=AccReport(0, (), "gcc", unreachable=1), regions=NONE_RAN))
    assert (r.status, r.got) == ("fail", "0")
    assert r.reason == ("the compute regions never ran: the program executed none of them (1 "
                        "compute region is in a function the program never calls, says the "
                        "compiler)")
    r = evaluate_one(spec, ev(acc=AccReport(1, (), "gcc"), regions=NONE_RAN))
    assert r.status == "fail" and r.reason.endswith("(is the code that holds them called?)")
    # Not counted although the runtime loaded the library: never a pass, never the fallback.
    for state in ("unfinished", "unreadable"):
        r = evaluate_one(spec, ev(acc=AccReport(1, (), "gcc"), regions=RegionsRan(state, why="w")))
        assert (r.status, r.reason) == ("incomplete", "w")
    # The compiler's report of reachable code, when the run did not load the library, or no run.
    loaded_not = RegionsRan("not_loaded", why="no library")
    r = evaluate_one(spec, ev(acc=AccReport(1, (), "gcc"), regions=loaded_not))
    assert r.status == "pass" and r.reason.endswith("(from the compiler's report: no library)")
    r = evaluate_one(spec, ev(acc=AccReport(0, (), "gcc", unreachable=2), regions=loaded_not))
    assert (r.status, r.reason) == (
        "fail", "the compute regions never run: the compiler made them only in functions the "
                "program never calls (from the compiler's report: no library)")
    r = evaluate_one(spec, ev(acc=AccReport(1, (), "gcc"), ran=False))
    assert r.status == "pass" and r.reason.endswith("from the compiler's report: the program was not run)")


def test_regions_ran() -> None:
    two = CheckSpec("regions_ran", "ran", minimum=2)
    r = evaluate_one(two, ev(regions=TWO_RAN))
    assert (r.status, r.expected, r.got, r.reason) == (
        "pass", "≥ 2 compute regions run", "2",
        "2 compute regions ran: line 47 (main) 1000 times, line 55 (main) 1000 times")
    half = RegionsRan("counted", (ConstructRan(1, 47, "main"),))
    r = evaluate_one(two, ev(regions=half, acc=AccReport(1, (), "gcc", unreachable=1)))
    assert (r.status, r.got) == ("fail", "1")
    assert r.reason == ("1 of 2 compute regions ran (ran: line 47 (main) once) (1 compute "
                        "region is in a function the program never calls, says the compiler)")
    for regions in (None, RegionsRan("unfinished", why="killed"), RegionsRan("not_loaded", why="x")):
        assert evaluate_one(two, ev(regions=regions)).status == "incomplete"
    r = evaluate_one(two, ev(regions=TWO_RAN, ran=False))
    assert (r.status, r.reason) == ("incomplete", "the program was not run (-n)")


def test_no_implicit_data() -> None:
    spec = CheckSpec("no_implicit_data", "data")
    found = ImplicitData("A", 12, "parallel", "A used in the parallel region at line 12 without a data clause")
    r = evaluate_one(spec, ev(acc=AccReport(1, (found,), "gcc")))
    assert (r.status, r.got, r.reason) == ("fail", "A", found.detail)
    assert evaluate_one(spec, ev(acc=AccReport(1, (), "gcc"))).status == "pass"
    r = evaluate_one(spec, ev(acc=AccReport(1, (), "gcc"), regions=NONE_RAN))
    assert (r.status, r.got) == ("fail", "no compute region ran")
    r = evaluate_one(spec, ev(acc=AccReport(0, (), "gcc", unreachable=1)))
    assert r.status == "fail" and r.reason == (
        "no compute region: nothing runs on the device (1 compute region is in a function the "
        "program never calls, says the compiler)")


def test_source_and_trace_checks() -> None:
    spec = CheckSpec("source", "tile", regex=r"\btile\s*\(", reason="use tile")
    assert evaluate_one(spec, ev(source="#pragma acc loop tile(32,32)\n")).status == "pass"
    assert evaluate_one(spec, ev(source="#pragma acc loop\n")).reason == "use tile"
    r = evaluate_one(CheckSpec("queues", "queues", minimum=3), ev())
    assert r.status == "incomplete" and "GPU trace" in r.reason


def test_trace_checks_on_trace_values() -> None:
    gpu = {"ran_on_gpu": 1.0, "kernels": 200.0, "queues": 1.0, "bytes_moved": 268_443_456.0}
    host = {"ran_on_gpu": 0.0, "kernels": 0.0, "queues": 0.0, "bytes_moved": 0.0}

    def with_trace(values: dict[str, float], output: str = "iterations = 1000\n") -> Evidence:
        base = ev(output)
        return Evidence(base.source_text, base.language, base.build, base.run, base.acc,
                        base.solution_output, trace_values=values)

    assert evaluate_one(CheckSpec("ran_on_gpu", "gpu"), with_trace(gpu)).status == "pass"
    r = evaluate_one(CheckSpec("ran_on_gpu", "gpu"), with_trace(host))
    assert (r.status, r.reason) == ("fail", "no kernel ran on the GPU: the OpenACC regions ran on the host")
    r = evaluate_one(CheckSpec("queues", "queues", minimum=3), with_trace(gpu))
    assert (r.status, r.got) == ("fail", "1") and "async(n)" in r.reason
    assert evaluate_one(CheckSpec("queues", "queues", minimum=1), with_trace(gpu)).status == "pass"
    total = CheckSpec("data_moved", "data", max_bytes=100e6)
    assert evaluate_one(total, with_trace(gpu)).status == "fail"
    per_it = CheckSpec("data_moved", "data", max_bytes=64e6, per_iteration=r"iterations\s*=\s*(\d+)")
    r = evaluate_one(per_it, with_trace(gpu))
    assert (r.status, r.got, r.expected) == ("pass", "268 kB", "≤ 64 MB per iteration")
    r = evaluate_one(per_it, with_trace(gpu, "iterations = 2\n"))
    assert r.status == "fail" and r.reason.endswith("keep the data on the device")
    r = evaluate_one(per_it, with_trace(gpu, "no count here\n"))
    assert (r.status, r.got) == ("fail", "no iteration count")


def test_trace_checks_do_not_judge_a_run_that_did_not_end_normally() -> None:
    """Work still queued on the GPU when a program dies may or may not reach its trace (the GPU
    machine: one program, 0 kernels graded alone, 3 beside seven others): the trace checks are
    incomplete, the same whatever else ran; the exit check fails it."""
    gpu = {"ran_on_gpu": 1.0, "kernels": 3.0, "queues": 3.0, "bytes_moved": 1e3, "gpu_busy": 0.4}
    for rc, how in ((1, "exit code 1"), (-11, "killed by SIGSEGV")):
        died = dataclasses.replace(ev(rc=rc), trace_values=gpu)
        for spec in (CheckSpec("ran_on_gpu", "gpu"), CheckSpec("queues", "queues", minimum=3),
                     CheckSpec("data_moved", "data", max_bytes=1.0),
                     CheckSpec("gpu_busy", "busy", min_share=0.25)):
            r = evaluate_one(spec, died)
            assert r.status == "incomplete", (spec.kind, r)
            assert r.reason == CUT_SHORT.format(how=how), r.reason
        assert evaluate_one(CheckSpec("exit_ok", "exit"), died).status == "fail"
    ended = dataclasses.replace(ev(), trace_values=gpu)
    assert evaluate_one(CheckSpec("queues", "queues", minimum=3), ended).status == "pass"
    assert evaluate_one(CheckSpec("data_moved", "data", max_bytes=1.0), ended).status == "fail"


def test_a_run_stopped_at_its_limit_is_judged_on_its_trace_so_far() -> None:
    """The tracer writes its records as they come: the trace of a run stopped at its time
    limit holds at least what it did until then. What that much decides stands, said so
    (kernels seen, more data than the whole run may move, a time past the speed scale's end);
    the rest stays incomplete, and an interrupted run (the student's Ctrl-C) is not judged."""
    per_it = CheckSpec("data_moved", "data", max_bytes=64e6, per_iteration=r"iterations\s*=\s*(\d+)")
    speed = CheckSpec("speed", "run time", scale=(1.5, 10.0), per_iteration=r"iterations\s*=\s*(\d+)")
    gpu = {"kernels": 40.0, "queues": 1.0, "bytes_moved": 20e9, "gpu_busy": 0.1}

    def stopped(values: dict[str, float], seconds: float = 12.0, solution_s: float = 1.0,
                interrupted: bool = False) -> Evidence:
        proc = ProcResult(("prog",), None, timed_out=True, interrupted=interrupted, seconds=seconds)
        return dataclasses.replace(ev(solution="error = 1e-3\niterations = 100\n"),
                                   run=RunResult(("prog",), proc), trace_values=values,
                                   solution_timed={"seconds": (solution_s * 0.9, solution_s)})

    said = "judged on the GPU trace until the run was stopped at 12.0 s: "
    r = evaluate_one(CheckSpec("ran_on_gpu", "gpu"), stopped(gpu))
    assert (r.status, r.reason) == ("pass", said + "40 kernels ran on the GPU"), r
    r = evaluate_one(per_it, stopped(gpu))
    assert (r.status, r.got) == ("fail", "≥ 200 MB"), r
    assert r.reason.startswith(said + "20 GB moved between host and device before the stop"), r
    assert "over the solution's 100 iterations" in r.reason, r.reason
    r = evaluate_one(speed, stopped(gpu))
    assert (r.status, r.credit, r.got) == ("fail", 0.0, "≥ 12.0×"), r
    assert r.reason.startswith(said + "your run at least 12.0× the solution's: none of the points")
    # Not decided by what it did so far: incomplete, as a run cut short.
    little = {"kernels": 0.0, "queues": 0.0, "bytes_moved": 1e6, "gpu_busy": 0.0}
    for spec in (CheckSpec("ran_on_gpu", "gpu"), per_it, CheckSpec("queues", "queues", minimum=3),
                 CheckSpec("gpu_busy", "busy", min_share=0.25)):
        r = evaluate_one(spec, stopped(little))
        assert (r.status, r.reason) == ("incomplete", CUT_SHORT.format(how="timed out")), r
    r = evaluate_one(speed, stopped(gpu, seconds=5.0))
    assert r.status == "incomplete", r  # stopped at 5× of a 1 s solution: 5× or more, not decided
    r = evaluate_one(CheckSpec("ran_on_gpu", "gpu"), stopped(gpu, interrupted=True))
    assert (r.status, r.reason) == ("incomplete", CUT_SHORT.format(how="interrupted")), r


def test_a_gpu_timed_speed_check_of_a_run_stopped_in_a_kernel() -> None:
    """`measure = "gpu"`: a run stopped while its one long kernel runs has almost no GPU time
    in its records (the copies before it); the tracer's tick says the GPU was still at work,
    and that much decides (profile/summary.trace_values' gpu_span_at_least_s)."""
    speed = CheckSpec("speed", "run time", scale=(1.5, 10.0), measure="gpu")

    def stopped(at_least: float) -> Evidence:
        proc = ProcResult(("prog",), None, timed_out=True, seconds=6.0)
        values = {"kernels": 0.0, "gpu_span_s": 0.002, "gpu_span_at_least_s": at_least}
        return dataclasses.replace(ev(solution="total = 4\n"), run=RunResult(("prog",), proc),
                                   trace_values=values,
                                   solution_timed={"seconds": (0.5, 0.55), "gpu_span_s": (0.01, 0.012)})

    r = evaluate_one(speed, stopped(5.2))
    assert (r.status, r.credit, r.got) == ("fail", 0.0, "≥ 433.3×"), r
    assert r.reason.startswith("judged on the GPU trace until the run was stopped at 6.0 s: your "
                               "GPU time at least 433.3× the solution's: none of the points"), r.reason
    # What its records hold alone (no tick: its kernels all ended) decides nothing here.
    r = evaluate_one(speed, stopped(0.002))
    assert r.status == "incomplete", r


def test_a_program_that_could_not_start_is_not_judged_on_its_run() -> None:
    """Its launcher, a profiler or the box failed: the checks of what a run shows are
    incomplete, saying why; the ones on the source still judge."""
    proc = ProcResult(("prog",), None, start_error="nsys ended (exit code 1) before it started")
    never = dataclasses.replace(ev(), run=RunResult(("prog",), proc),
                                trace_values={"kernels": 0.0})
    for spec in (CheckSpec("exit_ok", "exit"), CheckSpec("line", "greeting", exact="hi"),
                 CheckSpec("ran_on_gpu", "gpu")):
        r = evaluate_one(spec, never)
        assert (r.status, r.got) == ("incomplete", "not run"), r
        assert r.reason == ("not judged: the program could not be started (nsys ended (exit code "
                            "1) before it started), so it did not run"), r.reason
    r = evaluate_one(CheckSpec("source", "clause", regex=r"#pragma acc parallel"), never)
    assert r.status == "pass", r


def test_agrees_with_host() -> None:
    """The GPU's numbers against the same build's on the host (PCAST's idea): a race that
    still prints plausible numbers fails; no comparison (no GPU, a failed run) is incomplete."""
    spec = CheckSpec("agrees_with_host", "as host", pattern=r"bin\s+\d+\s*=\s*(\d+)",
                     abs_tol=0.0, rel_tol=0.0)
    host = "bin 0 = 250\nbin 1 = 750\n"

    def compared(device: str | None, on_host: str | None = host, problem: str = "") -> Evidence:
        return dataclasses.replace(ev(device or ""), host=HostComparison(device, on_host, problem))

    r = evaluate_one(spec, compared(host))
    assert (r.status, r.reason) == ("pass", "prints the same 2 values on the GPU as on the host")
    r = evaluate_one(spec, compared("bin 0 = 250\nbin 1 = 731\n"))
    assert r.status == "fail" and r.reason.startswith("value 2 of 2 is 731 on the GPU, 750 on the host")
    assert "a race?" in r.reason
    r = evaluate_one(spec, compared("bin 0 = 250\n"))
    assert r.status == "fail" and "twice, on the GPU once" in r.reason, r.reason
    r = evaluate_one(spec, compared(None, None, "no GPU here"))
    assert (r.status, r.reason) == ("incomplete", "no GPU here")
    r = evaluate_one(spec, ev(host))  # not compared at all: the run did not end well
    assert r.status == "incomplete" and "nothing to compare" in r.reason
    r = evaluate_one(spec, compared(host, "nothing\n"))
    assert r.status == "incomplete" and "on the host the program does not print" in r.reason


def test_a_gpu_build_without_a_trace_says_why_not_to_add_profile() -> None:
    """The checks collect their trace themselves on a GPU (no --profile needed): a GPU build
    without one says why — no GPU here, or the tracer's own reason — never "run with --profile"."""
    spec = CheckSpec("ran_on_gpu", "gpu")
    none = dataclasses.replace(ev(), target="gpu")
    r = evaluate_one(spec, none)
    assert (r.status, r.reason) == ("incomplete", NO_TRACE.format(why=NO_GPU_HERE))
    assert "--profile" not in r.reason
    told = dataclasses.replace(none, trace_problem="CUPTI not found (install the CUDA toolkit)")
    assert evaluate_one(spec, told).reason == \
        "needs a GPU trace: CUPTI not found (install the CUDA toolkit)"


def test_a_pattern_matches_within_one_line() -> None:
    """`^\\s*` cannot start a match on the blank line above what it names: the line found is
    the directive's own, in C and in Fortran, counted from the source's first line."""
    from idrrun.checks import regex

    tile = r"(?im)^\s*(#pragma\s+acc|!\$acc)\b.*\btile\s*\("
    c = "int main(void) {\n\n    #pragma acc parallel loop tile(32, 32)\n    for (;;) ;\n}\n"
    f = "program p\n\n  !$acc parallel loop tile(32, 32)\n  do i = 1, n\n  end do\nend program\n"
    for text in (c, f):
        assert [line for line, _ in regex.matches(tile, text)] == [2]
    assert regex.matches(r"a\s+b", "a\nb\na b\n") == [(2, "a b")]
    assert regex.findall(r"x\s*=\s*(\d+)", "x =\n5\nx = 7\n") == ["7"]
    spec = CheckSpec("source", "tile", regex=tile)
    for language, text in (("c", c), ("fortran", f)):
        for first_line in (1, 2):  # a file, a cell (its magic line is line 1)
            found = dataclasses.replace(ev(source=text), language=language, first_line=first_line)
            r = evaluate_one(spec, found)
            assert (r.status, r.line) == ("pass", 2 + first_line), r
            assert r.reason.startswith(f"found at line {2 + first_line}: '") and "tile" in r.reason


def test_a_region_is_named_by_the_function_it_is_written_in() -> None:
    """The source's function around a line (not the one the compiler inlined it into), and a
    compiler's symbol read back into the student's name."""
    from idrrun.checks.loops import enclosing_function
    from idrrun.toolchains.diagnostics import student_symbol

    c = ("#include <stdio.h>\nstatic void init(int n, double *x)\n{\n    #pragma acc parallel loop\n"
         "    for (int i = 0; i < n; i++) { x[i] = i; }\n}\nstruct s { int a; };\n"
         "int main(void) {\n    if (1) { init(3, 0); }\n    return 0;\n}\n")
    assert [enclosing_function(c, n, "c") for n in range(1, 12)] == \
        [None, None, "init", "init", "init", "init", None, "main", "main", "main", "main"]
    f = ("program demo\n  call init(3)\ncontains\n  subroutine init(n)\n    integer :: n\n"
         "    !$acc parallel loop\n    do i = 1, n\n    end do\n  end subroutine init\n"
         "  real(8) function twice(a)\n    twice = 2 * a\n  end function\nend program demo\n")
    assert [enclosing_function(f, n, "fortran") for n in range(1, 14)] == \
        ["demo", "demo", "demo", "init", "init", "init", "init", "init", "init", "twice",
         "twice", "twice", "demo"]
    assert [student_symbol(s) for s in ("main._omp_fn.0", "main$_omp_fn$1", "MAIN__",
                                         "__heat_MOD_step", "init.constprop.0", "D.1234",
                                         "parm.5", "saxpy")] == \
        ["main", "main", "the main program", "step", "init", "", "", "saxpy"]
    ran = RegionsRan("counted", (ConstructRan(count=1, line=4, function="main"),
                                 ConstructRan(count=2, line=None, function="MAIN__")))
    r = evaluate_one(CheckSpec("regions_ran", "regions", minimum=3),
                     dataclasses.replace(ev(source=c), regions=ran))
    assert r.reason == ("2 of 3 compute regions ran (ran: line 4 (init) once, a region (the main "
                        "program) 2 times)"), r.reason


def test_an_untouched_start_file_fails_for_want_of_openacc() -> None:
    """No directive: the OpenACC runtime never starts, so it loads no counting library; none
    of its regions ran — a fail, never a question about ACC_PROFLIB."""
    start = "int main(void) {\n    for (int i = 0; i < 3; i++) ;\n    return 0;\n}\n"
    never = dataclasses.replace(ev(source=start), regions=RegionsRan("not_loaded", why="no lib"))
    for spec in (CheckSpec("regions_ran", "regions", minimum=2),
                 CheckSpec("loop_on_device", "the loop", pattern=r"for \(")):
        r = evaluate_one(spec, never)
        assert r.status == "fail" and "ACC_PROFLIB" not in r.reason and "no lib" not in r.reason, r
    r = evaluate_one(CheckSpec("loop_on_device", "the loop", pattern=r"for \("), never)
    assert r.reason == "the loop (line 2) runs on the host: put it in a compute region"
    ported = dataclasses.replace(never, source_text="#pragma acc parallel\n" + start)
    assert evaluate_one(CheckSpec("regions_ran", "regions"), ported).status == "incomplete"


def test_too_much_data_moved_is_placed_on_the_directive_that_moves_it() -> None:
    """134 MB per iteration: the `update self(A)` inside the iteration loop is the line that
    moves it, in C and Fortran, numbered as the student reads the source (a cell: +1)."""
    c = ("int main(void) {\n    #pragma acc data copy(A[0:n])\n    while (err > tol) {\n"
         "        #pragma acc parallel loop\n        for (int i = 0; i < n; i++) A[i] = 0;\n"
         "        #pragma acc update self(A[0:n])\n        iter++;\n    }\n}\n")
    f = ("program p\n  !$acc data copy(A)\n  do while (err > tol)\n    !$acc parallel loop\n"
         "    do i = 1, n\n      A(i) = 0\n    end do\n    !$acc update self(A)\n  end do\n"
         "  !$acc end data\nend program\n")
    spec = CheckSpec("data_moved", "data", max_bytes=64e6, per_iteration=r"iterations\s*=\s*(\d+)")
    values = {"bytes_moved": 268e6 * 10}
    for language, text, line in (("c", c, 6), ("fortran", f, 8)):
        for first_line in (1, 2):
            base = ev("iterations = 10\n", source=text)
            found = dataclasses.replace(base, language=language, first_line=first_line,
                                        trace_values=values)
            r = evaluate_one(spec, found)
            assert (r.status, r.line) == ("fail", line + first_line - 1), r
            assert r.reason.endswith(f"(line {line + first_line - 1} moves data at each "
                                     "iteration of its loop)"), r.reason
    kept = dataclasses.replace(ev("iterations = 10\n", source=c.replace(
        "        #pragma acc update self(A[0:n])\n", "")), trace_values=values)
    assert evaluate_one(spec, kept).line is None  # nothing in a loop moves data: no line
