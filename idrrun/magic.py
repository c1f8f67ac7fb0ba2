"""The notebook front end: %%idrrun and %idrrunfile, thin over pipeline.execute."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from IPython.core.error import UsageError as IPythonUsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from IPython.display import DisplayHandle, display

from . import doctor, toolchains
from .annotate import Listing
from .display import (AnnotatedView, ElapsedView, TextReporter, VerdictView, color_allowed,
                      live_terminal, render_failure)
from .errors import IdrrunError
from .errors import UsageError as IdrrunUsage
from .checking import run_with_options
from .model import Failure, RunRequest, RunResult, Toolchain, Verdict
from .profile.model import ProfileReport
from .profile.render import ProfileView
from .request import config, options, source


class IdrrunFailure(Exception):
    """Raised at the end of a failed cell so that notebook runners (nbclient) see it.

    IPython shows `_render_traceback_` instead of a Python traceback: the student reads one
    message (step, command, exit code or signal, hint), not idrrun's internals.
    """

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.step} failed: {failure.what}")
        self.failure = failure

    def _render_traceback_(self) -> list[str]:
        return render_failure(self.failure).splitlines()


def _wants_color() -> bool:
    """Notebooks render ANSI colours in output; plain terminals only when they say so; nothing
    has colour under NO_COLOR."""
    if not color_allowed():
        return False
    if "ipykernel" in sys.modules:
        return True
    return sys.stdout.isatty() and os.environ.get("TERM", "dumb") != "dumb"


_MAGIC_ALONE = re.compile(r"%%idrrun(\s|$)")
NO_CODE = ("%%idrrun: the cell has no code below the %%idrrun line (%%idrrun --help lists the "
           "flags; %idrrunfile FILE runs a file)")
LINE_NO_CODE = ("%idrrun runs no code: put %%idrrun on the first line of a cell, the code below "
                "it, or use %idrrunfile FILE")


def give_empty_cells_a_body(lines: list[str]) -> list[str]:
    """An input transformer (IPython's cleanup stage): `%%idrrun --help` alone in a cell gets
    one blank body line. IPython refuses a cell magic whose body is empty before calling it
    ("the cell body is empty"); with a blank line, the magic is called and answers: the help,
    or what is missing."""
    if lines and _MAGIC_ALONE.match(lines[0]) and not "".join(lines[1:]).strip():
        return [lines[0].rstrip("\n") + "\n", "\n"]
    return lines


# IPython's completeness check (is the terminal's cell finished?) skips transformers that say
# so: there a lone `%%idrrun -l c` line must stay incomplete, waiting for its code.
give_empty_cells_a_body.has_side_effects = True  # type: ignore[attr-defined]


def cell_number(shell: Any) -> int:
    """The N of the `In [N]` the user sees for the running cell. IPython 9 increments
    execution_count before it runs a cell (8 after): the running cell's own result holds its
    number in both."""
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    count = getattr(result, "execution_count", None)
    if isinstance(count, int):
        return count
    return int(getattr(shell, "execution_count", 0) or 0)


class NotebookReporter(TextReporter):
    """Text for the build and run; the verdict as a rich display (HTML table in notebooks).

    What is said of the machine (the probe's warnings and protections, the family's notes on
    where the regions run) is the same for every cell: each is said once per kernel, in the
    first cell that has it (`said` holds them), not on every cell of the notebook. The header
    of every cell still says where its regions run."""

    def __init__(self, stream: TextIO, color: bool, said: set[str], machine: Iterable[str]) -> None:
        # In a kernel the run's time is a display updated in place; in a terminal IPython, a
        # status line (TextReporter's), as `idrrun run` shows it.
        self._kernel = "ipykernel" in sys.modules
        super().__init__(stream, color=color, live=not self._kernel and live_terminal(stream))
        self._said = said
        self._machine = set(machine)
        self._elapsed: DisplayHandle | None = None

    def started(self, request: RunRequest, toolchain: Toolchain) -> None:
        self._machine.update(toolchain.machine_notes)
        super().started(request, toolchain)

    def notes(self, notes: Sequence[str]) -> None:
        fresh = [note for note in notes if note not in self._machine or note not in self._said]
        self._said.update(note for note in fresh if note in self._machine)
        super().notes(fresh)

    def running(self, seconds: float) -> None:
        """One display for the cell's run, made at its first tick and updated in place: a
        notebook (nbclient's too) keeps one output for it, not one per second."""
        if not self._kernel:
            super().running(seconds)
        elif self._elapsed is None:
            sys.stdout.flush()  # below what the program printed so far
            self._elapsed = display(ElapsedView(seconds, self._limit), display_id=True)
        else:
            self._elapsed.update(ElapsedView(seconds, self._limit))

    def ran(self, request: RunRequest, result: RunResult) -> None:
        if self._elapsed is not None:
            self._elapsed.update(ElapsedView(None))  # the run's own line says how long it took
            self._elapsed = None
        super().ran(request, result)

    def verdict(self, verdict: Verdict) -> None:
        sys.stdout.flush()
        display(VerdictView(verdict))

    def profile(self, report: ProfileReport) -> None:
        sys.stdout.flush()
        display(ProfileView(report))

    def annotated(self, listing: Listing) -> None:
        sys.stdout.flush()
        display(AnnotatedView(listing))


@magics_class
class IdrrunMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._machine_notes_said: set[str] = set()  # NotebookReporter's, for this kernel
        cleanup = getattr(shell, "input_transformers_cleanup", None)
        if isinstance(cleanup, list) and give_empty_cells_a_body not in cleanup:
            cleanup.append(give_empty_cells_a_body)

    @line_cell_magic
    def idrrun(self, line: str, cell: str | None = None) -> None:
        """Compile and run this cell. `%%idrrun --help` lists the flags."""
        if cell is None:
            # The line magic exists for `%idrrun --help`; with other flags there is no code.
            try:
                if options.parse_line(line, prog="%%idrrun") is None:
                    return
            except IdrrunError as exc:
                raise IPythonUsageError(str(exc)) from None
            raise IPythonUsageError(LINE_NO_CODE)
        self._run(line, cell)

    @line_magic
    def idrrun_doctor(self, line: str) -> None:
        """What this machine offers: compilers, GPU offloading, profilers, MPI, SLURM, limits."""
        try:
            workdir = Path.cwd()
            display(doctor.diagnose(config.load(workdir), workdir))
        except IdrrunError as exc:
            raise IPythonUsageError(str(exc)) from None

    @line_magic
    def idrrunfile(self, line: str) -> None:
        """Compile and run a source file: `%idrrunfile [flags] FILE`."""
        self._run(line, None)

    def _run(self, line: str, cell: str | None) -> None:
        prog = "%%idrrun" if cell is not None else "%idrrunfile"
        workdir = Path.cwd()
        opts: options.Options | None = None
        try:
            opts = options.parse_line(line, prog=prog, with_file=cell is None)
            if opts is None:
                return
            settings = config.load(workdir)
            if cell is not None:
                if not cell.strip():
                    raise IdrrunUsage(NO_CODE)
                name = opts.keep or f"cell[{cell_number(self.shell)}]"
                src = source.from_cell(cell, name, opts.language, settings.language, workdir)
            else:
                assert opts.file is not None
                src = source.from_file(workdir / os.path.expanduser(opts.file), opts.language, opts.file)
            # probed at every cell: the kernel keeps what it looked up, and checks in well
            # under a millisecond that PATH's folders and the tools are still as they were (a
            # compiler installed since is found: toolchains/onpath.py, probecache.py)
            probe = toolchains.probe(settings, opts.family)
            protections = probe.protections.notes if probe.protections is not None else ()
            reporter = NotebookReporter(sys.stdout, color=_wants_color(),
                                        said=self._machine_notes_said,
                                        machine=(*probe.warnings, *protections))
            reporter.notes(protections)  # what this machine cannot enforce
            outcome = run_with_options(opts, src, settings, workdir, probe, reporter)
        except IdrrunError as exc:
            _gotten(opts, workdir, f"cell In [{cell_number(self.shell)}] did not run ({exc})")
            # Exactly IPython's UsageError: the shell prints one line, no traceback.
            raise IPythonUsageError(str(exc)) from None
        if self.shell is not None:
            self.shell.user_ns["_idrrun"] = outcome
        _gotten(opts, workdir, None if outcome.failure is None else
                f"cell In [{cell_number(self.shell)}] failed ({outcome.failure.what})")
        if outcome.failure is not None:
            if outcome.request.raise_on_failure:
                raise IdrrunFailure(outcome.failure)
            reporter.failure(outcome.failure)


def _gotten(opts: options.Options | None, workdir: Path, why: str | None) -> None:
    """Tell idrrun.images what became of the files the cell was to write (--get): a picture of
    a cell that did not run is then shown as missing, with why, not as an error of its own."""
    if opts is not None and opts.get_files:
        from . import images  # Pillow, only for a cell that writes files

        images.cell_outcome([workdir / name for name in opts.get_files], why)


IdrrunMagics.idrrun.__doc__ = options.help_text("%%idrrun", with_file=False)
IdrrunMagics.idrrunfile.__doc__ = options.help_text("%idrrunfile", with_file=True)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext idrrun` registers %%idrrun, %idrrunfile and %idrrun_doctor."""
    ipython.register_magics(IdrrunMagics)
