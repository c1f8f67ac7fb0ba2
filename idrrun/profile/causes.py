"""The diagnosis's rules (diagnose.py), in the order they are tried, and when each would matter.

Each rule is a plain function (Seen) -> [Cause] of datacauses.py (data between host and GPU) or
kernelcauses.py (kernels): one cause a teacher names, placed on the line of the directive or
loop responsible, with its evidence, the sentence of what to change, and what the fix would
gain. Each needs the pattern in the source (or the compiler's words about it) before it says
anything; the trace then says what it costs. A rule that cannot tell leaves it unsaid: a
published solution must get no cause.
"""

from __future__ import annotations

from collections.abc import Callable

from .datacauses import alloc_in_loop, copies_in_loop, copy_not_needed, host_work, update_in_loop
from .kernelcauses import (atomic_reduction, few_gangs, few_lanes, kernel_per_row, missing_collapse,
                           serial_construct, serial_kernels, serial_loop, sync_queues, uncoalesced)
from .model import Cause
from .seen import Seen

# When a cause that costs little at the course's sizes would matter: what its cost grows with.
MATTERS = {
    "copies_in_loop": "with the iterations and the arrays' size",
    "host_work": "with the iterations and the arrays' size",
    "update_in_loop": "with the iterations and the arrays' size",
    "alloc_in_loop": "with the iterations",
    "copy_not_needed": "with the arrays' size, and weighs most in a short run",
    "few_gangs": "with the loop's work",
    "few_lanes": "with the loop's work",
    "serial_kernels": "with the loop's length",
    "serial_construct": "with the loop's length",
    "serial_loop": "with the inner loop's length",
    "missing_collapse": "when the outer loop has few iterations, and with the arrays",
    "uncoalesced": "with the arrays' size",
    "atomic_reduction": "with the loop's iterations",
    "kernel_per_row": "with the rows",
    "sync_queues": "with the independent work (more arrays, larger ones)",
}


Rule = Callable[[Seen], "list[Cause]"]


RULES: tuple[Rule, ...] = (copies_in_loop, host_work, update_in_loop, alloc_in_loop,
                           copy_not_needed, few_gangs, few_lanes, serial_kernels,
                           serial_construct, serial_loop, missing_collapse, uncoalesced,
                           atomic_reduction, kernel_per_row, sync_queues)
