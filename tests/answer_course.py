"""The one-exercise course of the classroom's tests and benchmark (test_classroom.py,
test_hub.py, benchmarks/classroom_scale.py; test_slurm.py adds checks to its spec): "answer",
whose program prints C[0] (42 is right), written as a course's examples/."""

from __future__ import annotations

from pathlib import Path

SPEC = """\
name = "answer"
timeout = 30
[sources.c]
exercise = "C/answer_exercise.c"
solution = "C/answer_solution.c"
[args]
host = []
[[check]]
kind = "exit_ok"
[[check]]
kind = "value"
label = "C[0]"
pattern = 'C\\[0\\]\\s*=\\s*(\\S+)'
expected = 42
"""
PROGRAM = '#include <stdio.h>\nint main(void) {{ printf("C[0] = {value}\\n"); return 0; }}\n'


def write_course(examples: Path, spec: str = SPEC) -> Path:
    """EXAMPLES/answer.toml and its C start file (prints 0) and solution (prints 42)."""
    (examples / "C").mkdir(parents=True)
    (examples / "answer.toml").write_text(spec)
    (examples / "C" / "answer_exercise.c").write_text(PROGRAM.format(value=0))
    (examples / "C" / "answer_solution.c").write_text(PROGRAM.format(value=42))
    return examples


