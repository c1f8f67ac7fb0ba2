"""A toy compiler family, defined outside idrrun: what a contributor writes to add a family.

Its compiler is tests/fakes/toycc (a fake that records its argv and builds with gcc for the
host). Registered with `register()`; tests check that the magic, `idrrun grade` and the config
accept it at once, and that nothing else in idrrun needs to know it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from idrrun.model import (AccReport, BuildResult, CompilerInfo, DoctorLine, Probe, RunRequest,
                          Settings, Toolchain)
from idrrun.toolchains import registry
from idrrun.toolchains.family import OK, AccDecision, CommandFamily


@dataclass(frozen=True)
class ToyFamily(CommandFamily):
    def can_offload(self, c_compiler: CompilerInfo) -> bool:
        return False

    def openacc(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                settings: Settings) -> AccDecision:
        # -g1: line tables, so that the regions a checked run executed are placed on source
        # lines (profile/regions.py; without them loop_on_device cannot be told: incomplete).
        return AccDecision(("--toy-acc", "--toy-report", "-g1"), "host",
                           ("toy: OpenACC runs on the host",))

    def feedback(self, build: BuildResult) -> AccReport | None:
        if build.build_dir is None or not (build.build_dir / "toy-report.txt").is_file():
            return None
        regions = int((build.build_dir / "toy-report.txt").read_text().split()[1])
        return AccReport(regions, (), "toycc --toy-report")

    def feedback_files(self, toolchain: Toolchain) -> tuple[str, ...]:
        return ("toy-report.txt",)  # what a graded build keeps of its folder for feedback()

    def run_env(self, request: RunRequest, toolchain: Toolchain) -> Mapping[str, str]:
        return {"TOY_FAMILY_RUN": "1"}

    def gpu_context(self, toolchain: Toolchain) -> bool:
        return False

    def doctor(self, settings: Settings, active: bool) -> list[DoctorLine]:
        return [DoctorLine("toy family", OK, "toycc (fake)")]


TOY = ToyFamily(
    name="toy",
    summary="a toy family for idrrun's tests (toycc)",
    compilers={"c": "toycc", "mpi_c": "toycc"},
    install_hint="put tests/fakes on PATH",
)


def register() -> None:
    registry.register(TOY)
