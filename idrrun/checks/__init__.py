"""Exercise specs (specs), the check kinds evaluated on what a run produced (output_kinds,
program_kinds, trace_kinds; the verdict), and the OpenACC directives of a source (directives).
Pure: no processes are started here.
"""

# idrrun's own check kinds register themselves (checks/registry.py) as soon as any part of
# the package is imported, in this order: a spec read anywhere knows them.
from . import output_kinds, program_kinds, trace_kinds  # noqa: E402,F401
