"""What a compiler says about a program's OpenACC directives, read into model.AccReport.

Each family's module reads its own compiler's feedback (gccdumps for gcc, minfo for nvhpc/pgi);
this module holds what they share: the sentences shown to the student and two text helpers.
"""

from __future__ import annotations

COMPUTE_CONSTRUCTS: tuple[str, ...] = ("parallel", "kernels", "serial")

# Message templates, kept here so that tests can check the rendered text.
MSG_ARRAY = ("{var} is used in the {construct} region{at} without a data clause, so the runtime "
             "moves it implicitly: name it in copy, copyin, copyout or create, or in present if "
             "it is already on the device.")
MSG_POINTER = ("The pointer {var} is used in the {construct} region{at} without a data clause, so "
               "only its value, a host address, reaches the device and not the data it points "
               "to: name it with a section, e.g. copyin({var}[0:n]), or present({var}[0:n]) if "
               "the data is already on the device.")
MSG_IN_DATA = ("{var} is used in the {construct} region{at} without a data clause (it is in an "
               "enclosing data region{data_at}: add present({var})).")
MSG_ENTERED = ("{var} is used in the {construct} region{at} without a data clause (it was put on "
               "the device by the {directive} directive{data_at}: add present({var})).")
MSG_NVHPC = ("{var} is used in the {construct} region{at} without a data clause, so the compiler "
             "adds {clause} implicitly: name it in a data clause yourself, or in present if it "
             "is already on the device.")
MSG_NVHPC_UNKNOWN = ("{var} is used in the {construct} region{at} without a data clause, and the "
                     "compiler cannot tell how much of it to move: name it with a section, "
                     "e.g. copyin({var}[0:n]).")


def at(line: int | None) -> str:
    return f" at line {line}" if line is not None else ""




def balanced(text: str, open_at: int) -> int:
    """Index just past the parenthesis that closes the one at `open_at` (or len(text))."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def split_top(text: str, sep: str = ",") -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "([<":
            depth += 1
        elif ch in ")]>" and depth > 0:
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]
