"""request/resolve: the layers applied once — defaults < settings < exercise < the line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from idrrun.checks.specs import Exercise
from idrrun.model import CompilerInfo, GpuInfo, Probe, RunRequest, Settings
from idrrun.request import resolve
from idrrun.request.options import Options
from idrrun.request.policy import Policy
from idrrun.request.options import parse_line
from idrrun.request.source import from_cell

SRC = from_cell("int main(void){return 0;}\n", "cell[1]", "c", None, Path("/work"))
GCC = CompilerInfo("gcc", "/usr/bin/gcc", "gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
EXERCISE = Exercise(name="ex", title="ex", topic="t", path=Path("/ex.toml"), timeout=45.0,
                    options=("-DEX",), sources={}, host_args=("10",), gpu_args=("1000",))


def probe(gpus: tuple[GpuInfo, ...] = (), offload: bool = True) -> Probe:
    return Probe(family="gcc", compilers=(GCC,), gpus=gpus, offload=offload)


def req(line: str = "", settings: Settings = Settings(), exercise: Exercise | None = None,
        gpus: tuple[GpuInfo, ...] = ()) -> RunRequest:
    opts = parse_line(line)
    assert opts is not None
    return resolve.resolve(opts, SRC, Path("/work"), settings, probe(gpus), exercise)[0]


def test_defaults_come_from_the_request_itself() -> None:
    r = req()
    default = RunRequest(source=SRC, workdir=Path("/work"))
    assert (r.timeout, r.compile_timeout, r.max_output, r.limits) == (
        default.timeout, default.compile_timeout, default.max_output, default.limits)


def test_settings_over_defaults_line_over_settings() -> None:
    settings = Settings(values={"timeout": 30.0, "memory": 1 << 30, "max_output": 4096})
    assert req("", settings).timeout == 30.0
    assert req("", settings).limits.memory == 1 << 30 and req("", settings).max_output == 4096
    assert req("--timeout 5", settings).timeout == 5.0
    assert req("--memory none", settings).limits.memory is None  # "none" on the line: no limit


def test_exercise_between_settings_and_line() -> None:
    settings = Settings(values={"timeout": 30.0})
    assert req("", settings, EXERCISE).timeout == 45.0  # the exercise's own time limit
    assert req("--timeout 5", settings, EXERCISE).timeout == 5.0
    r = req("--options -O3", settings, EXERCISE)
    assert r.compiler_options == ("-DEX", "-O3")  # both, the line's last
    assert r.check == "ex"


def test_exercise_arguments_follow_the_toolchain_target() -> None:
    h100 = (GpuInfo("NVIDIA H100", "9.0", "580"),)
    assert req("-a", exercise=EXERCISE).program_args == ("10",)  # host build
    assert req("-a", exercise=EXERCISE, gpus=h100).program_args == ("1000",)  # GPU build
    assert req('-a --cliopts "7"', exercise=EXERCISE, gpus=h100).program_args == ("7",)


def test_stdin_is_relative_to_the_working_directory() -> None:
    assert req("--stdin in.txt").limits.stdin == Path("/work/in.txt")
    assert req("--stdin /abs/in.txt").limits.stdin == Path("/abs/in.txt")


def test_switches_and_object_builds() -> None:
    r = req("-n --notime --no-raise")
    assert (r.execute, r.show_time, r.raise_on_failure) == (False, False, False)
    assert req("--object").execute is False and req("--object").object_only


def test_toolchain_resolved_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from idrrun import toolchains

    calls = []
    real = toolchains.toolchain_for
    monkeypatch.setattr(toolchains, "toolchain_for", lambda *a: calls.append(a) or real(*a))
    opts = parse_line("-a")
    assert opts is not None
    request, toolchain = resolve.resolve(opts, SRC, Path("/work"), Settings(), probe(), EXERCISE)
    assert len(calls) == 1 and toolchain.target == "host"


def test_a_new_flag_reaches_the_request_by_name() -> None:
    # Every flag that targets the request names a real RunRequest field (or a Limits one).
    fields = {f.name for f in dataclasses.fields(RunRequest)}
    limits = {f"limits.{f.name}" for f in dataclasses.fields(RunRequest(SRC, Path("/")).limits)}
    for name, spec in resolve.specs():
        target = name if spec.to == resolve.SAME else spec.to
        if target is not None:
            assert target in fields | limits, f"{name} -> {target}"


def test_the_grader_keeps_only_what_its_policy_allows_of_a_line(tmp_path: Path) -> None:
    opts = parse_line('-a --profile --timeout 999 --memory none --cliopts "1" -l c --threads 4')
    assert opts is not None
    policy = Policy(room=tmp_path)
    assert policy.line(opts).given() == {"acc": True, "profile": "auto", "language": "c",
                                         "threads": 4}
    # What the grader completes: its time limit (none given: the exercise's), OpenACC on for an
    # OpenACC exercise unless the line says otherwise, a profile for the trace checks.
    assert policy.options(policy.line(Options())).acc is True
    assert Policy(room=tmp_path, openacc=False).options(Options()).acc is False
    assert Policy(room=tmp_path, timeout=5.0).options(policy.line(opts)).timeout == 5.0
    assert Policy(room=tmp_path, profile_traces=True).options(Options()).profile == "auto"


def test_the_grader_s_policy_is_the_last_layer(tmp_path: Path) -> None:
    """What a grader forces (its time limit, the box, the room, what is hidden) wins over the
    line and the exercise, whatever the line says; a host build is not profiled for the trace
    checks unless the line asked for it; arguments, limits and flags of the line are dropped."""
    h100 = (GpuInfo("NVIDIA H100", "9.0", "580"),)
    policy = Policy(room=tmp_path, hide=(Path("/course"),), timeout=7.0, profile_traces=True)
    line = parse_line('--timeout 999 --memory none --cliopts "1" --options -O3')
    assert line is not None
    for gpus in ((), h100):
        r, toolchain = resolve.resolve(line, SRC, Path("/work"), Settings(), probe(gpus), EXERCISE,
                                       policy)
        assert (r.timeout, r.sandbox, r.room, r.hide) == (7.0, True, tmp_path, (Path("/course"),))
        assert r.limits.memory is None and r.compiler_options == ("-DEX",) and r.acc
        assert r.program_args == (("1000",) if gpus else ("10",))
        assert r.profile == ("auto" if gpus else None), (gpus, r.profile)
    asked = parse_line("--profile --profiler builtin")
    assert asked is not None
    r, _ = resolve.resolve(asked, SRC, Path("/work"), Settings(), probe(), EXERCISE, policy)
    assert r.profile == "builtin"  # a host build profiled: the student asked for it
    # The requests derived from a graded one keep its policy, never the student's extras.
    again = resolve.with_args(r, ("5",))
    assert (again.program_args, again.profile, again.room) == (("5",), None, tmp_path)
    sol = resolve.for_solution(dataclasses.replace(r, keep="mine.c", get_files=("x",)), SRC,
                               tmp_path / "sol", tmp_path / "sol-room")
    assert (sol.workdir, sol.room, sol.keep, sol.get_files, sol.profile) == (
        tmp_path / "sol", tmp_path / "sol-room", None, (), None)
    assert (sol.timeout, sol.sandbox, sol.program_args) == (7.0, True, r.program_args)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_check_that_reads_the_gpu_trace_collects_it_on_a_gpu() -> None:
    """The course's own line (`-a --check blur_passes`, no --profile) collects the trace its
    trace checks read, quietly, on a GPU build with a GPU; --profile only decides whether the
    profile is shown; nothing is collected on the host, with -n, or without trace checks."""
    from idrrun.checks import specs

    blur = specs.load(EXAMPLES / "blur_passes.toml")
    assert blur.needs_trace
    h100 = (GpuInfo("NVIDIA H100", "9.0", "580"),)
    quiet = req("-a", exercise=blur, gpus=h100)
    assert (quiet.profile, quiet.show_profile) == ("builtin", False)
    # nsys where one is configured ([profiler] command): "auto" runs the configured command.
    nsys = req("-a", Settings(profiler=("nsys",)), exercise=blur, gpus=h100)
    assert (nsys.profile, nsys.show_profile) == ("auto", False)
    shown = req("-a --profile", exercise=blur, gpus=h100)
    assert (shown.profile, shown.show_profile) == ("auto", True)
    assert req("-a --profiler builtin", exercise=blur, gpus=h100).show_profile
    for r in (req("-a", exercise=blur), req("-a -n", exercise=blur, gpus=h100),
              req("-a", exercise=EXERCISE, gpus=h100), req("-a", gpus=h100)):
        assert (r.profile, r.show_profile) == (None, True)
    # The decision itself: a pure function of the exercise, the toolchain and the machine.
    opts = parse_line("-a")
    assert opts is not None
    _, gpu = resolve.resolve(opts, SRC, Path("/work"), Settings(), probe(h100), blur)
    _, host = resolve.resolve(opts, SRC, Path("/work"), Settings(), probe(), blur)
    assert resolve.checks_trace(blur, gpu, probe(h100)) == "builtin"
    assert resolve.checks_trace(blur, gpu, probe()) is None  # a GPU build, no GPU here
    assert resolve.checks_trace(blur, host, probe(h100)) is None
    assert resolve.checks_trace(None, gpu, probe(h100)) is None
    # The solution's run for the comparison keeps its trace and draws it (shown to nobody).
    sol = resolve.for_solution(quiet, SRC, Path("/sol"), profile=quiet.profile)
    assert (sol.profile, sol.show_profile) == ("builtin", True)
