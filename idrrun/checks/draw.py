"""Hidden argument sets drawn when grading, from the ranges of a spec's [args.draw].

Each value is a keyed hash (HMAC-SHA256, keyed with the instructor's seed) of the exercise's
name, the set's index and the argument's index, mapped onto its range. So the same seed draws the
same sets on any machine and at every regrading, another seed draws others, set i does not
depend on how many sets are drawn, and nothing reads or moves `random`'s global state. Pure: the
seed is chosen elsewhere (grading/report.py, grading_seed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

from .specs import ArgRange, Exercise, HiddenDraw

# Significant digits of a drawn float: short on a command line, read the same by C and Fortran.
FLOAT_DIGITS = 6


def _number(seed: str, exercise: str, index: int, argument: int) -> int:
    """256 bits for the argument-th value of the index-th set."""
    message = f"idrrun hidden set\0{exercise}\0{index}\0{argument}".encode()
    return int.from_bytes(hmac.new(seed.encode(), message, hashlib.sha256).digest(), "big")


def value(arg: ArgRange, number: int) -> str:
    """The range's value for a 256-bit number: one of its whole numbers, evenly (the modulo's
    bias is below 2**-190), or a float of [low, high] with FLOAT_DIGITS digits."""
    if arg.whole:
        count = (int(arg.high) - int(arg.low)) // arg.step + 1
        return str(int(arg.low) + number % count * arg.step)
    x = arg.low + (number >> 203) / 2**53 * (arg.high - arg.low)  # the top 53 bits: [0, 1)
    text = f"{x:.{FLOAT_DIGITS}g}"
    return text if arg.low <= float(text) <= arg.high else repr(x)  # rounded past an end


def draw_sets(spec: HiddenDraw, seed: str, exercise: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(value(arg, _number(seed, exercise, i, j)) for j, arg in enumerate(spec.ranges))
                 for i in range(spec.sets))


def drawn(exercise: Exercise, seed: str) -> Exercise:
    """The exercise as it is graded: its drawn sets after its fixed hidden ones."""
    if exercise.draw is None:
        return exercise
    sets = draw_sets(exercise.draw, seed, exercise.name)
    return dataclasses.replace(exercise, hidden_args=exercise.hidden_args + sets, draw=None)
