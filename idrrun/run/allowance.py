"""What the grader reads out of one graded run's box, all together: one allowance per row.

Everything a graded run leaves for the grader -- the files its checks want (a picture), the
built-in tracer's trace, the OpenACC regions records, nsys's report and its export -- is the
box's to write, forge and inflate. Each cap alone was not enough: a forged trace of 48 MiB
under the trace cap took the grader to 697 MiB, 1024 sparse regions records of 1 MiB each
(every one under its own cap) to 1 GiB. So every reader of a row's evidence asks one Ledger
first: each file counts its apparent size (st_size: a sparse file counts for what it claims,
not for the blocks it uses) and one file against the Allowance before a byte of it is read, and
what is parsed into memory (a trace's lines, a record's constructs) counts its records. Past
the allowance nothing more is read: the Ledger says why (`refused`), and the row fails at the
"evidence" limit -- the program wrote more than the grader reads, its doing, never the grader's
memory. The allowance is far above what an honest course run leaves (a Jacobi run of 1000
iterations traces 9000 records in 1.5 MB; a course's pictures are under 1 MB).

A class, not a stage: it is the running account of one row, handed to each reader in turn.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Allowance:
    """What the grader reads of one row's box at most."""

    bytes: int = 64 << 20  # apparent sizes of every file read or copied out, all together
    records: int = 50_000  # trace lines and regions constructs parsed into memory
    files: int = 64  # files read or copied out


EVIDENCE_LIMIT = "evidence"  # the limit (ProcResult.limit) of a row whose evidence was refused


class Ledger:
    """One row's account against its Allowance. Each reader asks `file()` before it opens or
    copies one, and `records()` as it parses; the first refusal is kept (`refused`) and every
    later request is refused too (what was not read cannot be judged in part)."""

    def __init__(self, allowance: Allowance = Allowance()) -> None:
        self.allowance = allowance
        self.bytes = 0
        self.record_count = 0
        self.files = 0
        self.refused = ""

    def _refuse(self, why: str) -> bool:
        if not self.refused:
            self.refused = why
        return False

    def file(self, name: str, size: int) -> bool:
        """Count one file of apparent `size` bytes; False (and `refused` says why) past the
        allowance, when nothing of it may be read."""
        if self.refused:
            return False
        allowance = self.allowance
        if self.files + 1 > allowance.files:
            return self._refuse(f"more than {allowance.files} files of evidence ({name} and "
                                "more): not read")
        if self.bytes + max(0, size) > allowance.bytes:
            return self._refuse(f"{name}: {size} bytes, past the {allowance.bytes >> 20} MiB of "
                                "evidence the grader reads of a run (sizes as the files claim "
                                "them, holes included): not read")
        self.files += 1
        self.bytes += max(0, size)
        return True

    def records(self, what: str, count: int) -> bool:
        """Count `count` records parsed into memory; False (and `refused`) past the allowance."""
        if self.refused:
            return False
        if self.record_count + count > self.allowance.records:
            return self._refuse(f"{what}: more than the {self.allowance.records} records of "
                                "evidence the grader reads of a run: not read")
        self.record_count += count
        return True

    @property
    def bytes_left(self) -> int:
        return max(0, self.allowance.bytes - self.bytes)

    @property
    def records_left(self) -> int:
        return max(0, self.allowance.records - self.record_count)
