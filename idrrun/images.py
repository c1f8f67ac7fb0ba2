"""Pictures that course programs write, compared and shown in a notebook (reading a picture's
file and drawing one: idrrun/pictures.py).

    compare_images                     got, expected -> Comparison (PSNR, max |difference|, size mismatch)
    image_check                        the `image` check kind: two files -> CheckResult
    show                               one picture, or a strip of several, for a notebook cell

In a notebook, after `%%idrrun -a --get blur.pgm ...`:

    from idrrun.images import show, compare_images
    show("blur.pgm")                          # one picture
    show("life_*.pgm")                        # a strip, in file-name order
    compare_images("blur.pgm", "ref.pgm")     # got | expected | difference, with the figures
"""

from __future__ import annotations

import glob
import html
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image as PILImage
from PIL import ImageMath

from .model import CheckResult
from .pictures import (Image, ImageError, ImageLike, PathLike, as_image, caption, check_size,
                       display_frame, figure_text, html_frames, html_strip, plane_mean, png_bytes,
                       read_pnm, read_raw, stats, strip_of, value_range)


# ---------------------------------------------------------------------------------------
# Figures


def _difference(got: PILImage.Image, expected: PILImage.Image) -> PILImage.Image:
    diff = ImageMath.lambda_eval(lambda a: a["g"] - a["e"], g=got, e=expected)
    assert isinstance(diff, PILImage.Image)
    return diff


def _square(plane: PILImage.Image) -> PILImage.Image:
    sq = ImageMath.lambda_eval(lambda a: a["d"] * a["d"], d=plane)
    assert isinstance(sq, PILImage.Image)
    return sq


def _abs(plane: PILImage.Image) -> PILImage.Image:
    out = ImageMath.lambda_eval(lambda a: abs(a["d"]), d=plane)
    assert isinstance(out, PILImage.Image)
    return out


@dataclass(frozen=True)
class Comparison:
    """How far a picture is from the expected one. problem != "" when no figures could be made."""

    got: Image
    expected: Image
    problem: str
    max_diff: float | None  # largest |got - expected| over the pixels
    mse: float | None  # mean of (got - expected)²
    psnr: float | None  # 10 log10(peak² / mse) in dB; inf when identical
    peak: float  # the expected image's maxval, or its range for raw data

    @property
    def identical(self) -> bool:
        return not self.problem and self.max_diff == 0.0

    def figures(self) -> str:
        """'PSNR 43.2 dB, max |difference| 2' or the problem."""
        if self.problem or self.psnr is None or self.max_diff is None:
            return self.problem
        if self.identical:
            return "identical (PSNR ∞, max |difference| 0)"
        return f"PSNR {self.psnr:.1f} dB, max |difference| {figure_text(self.max_diff)}"

    def passes(self, min_psnr: float | None = None, max_diff: float | None = None) -> bool:
        """Within both bounds given; with none given, only identical pictures pass."""
        if self.problem or self.psnr is None or self.max_diff is None:
            return False
        if min_psnr is None and max_diff is None:
            return self.identical
        return (min_psnr is None or self.psnr >= min_psnr) and \
            (max_diff is None or self.max_diff <= max_diff)

    def check(self, label: str = "image", min_psnr: float | None = None,
              max_diff: float | None = None) -> CheckResult:
        """This comparison as a row of the verdict table."""
        want = _bounds(min_psnr, max_diff)
        if self.problem:
            return CheckResult(label, "fail", want, "no figures", self.problem)
        got = self.figures()
        if self.passes(min_psnr, max_diff):
            return CheckResult(label, "pass", want, got,
                               f"{Path(self.got.source).name} agrees with the solution's picture")
        assert self.psnr is not None and self.max_diff is not None
        why: list[str] = []
        if min_psnr is None and max_diff is None:
            why.append("the picture should equal the solution's")
        if min_psnr is not None and self.psnr < min_psnr:
            why.append(f"PSNR {self.psnr:.1f} dB below {figure_text(min_psnr)} dB")
        if max_diff is not None and self.max_diff > max_diff:
            why.append(f"a pixel differs by {figure_text(self.max_diff)} "
                       f"(at most {figure_text(max_diff)} allowed)")
        return CheckResult(label, "fail", want, got,
                           f"{Path(self.got.source).name} differs from the solution's picture: "
                           + "; ".join(why))

    def __str__(self) -> str:
        return (f"got {self.got.source or 'image'} ({self.got.shape}) vs expected "
                f"{self.expected.source or 'image'} ({self.expected.shape}): {self.figures()}")

    def __repr__(self) -> str:
        return f"<Comparison {self}>"

    def _repr_png_(self) -> bytes:
        frames, labels = self._frames()
        return png_bytes(strip_of(frames, labels, footer=self.figures()))

    def _repr_html_(self) -> str:
        frames, labels = self._frames()
        return html_frames(frames, labels, footer=self.figures())

    def _frames(self) -> tuple[list[PILImage.Image], list[str]]:
        frames = [display_frame(self.got), display_frame(self.expected)]
        labels = [f"got: {caption(self.got)}", f"expected: {caption(self.expected)}"]
        if not self.problem and self.max_diff is not None:
            diffs = tuple(_abs(_difference(g, e)) for g, e in zip(self.got.planes, self.expected.planes))
            # The difference is stretched to its own maximum (white) so that small errors show.
            top = self.max_diff if self.max_diff > 0 else 1.0
            shown = Image(self.got.width, self.got.height, diffs, top, "difference", "|got - expected|")
            frames.append(display_frame(shown))
            labels.append(f"|difference|: black 0, white {figure_text(self.max_diff)}"
                          if self.max_diff > 0 else "|difference|: all 0")
        return frames, labels


def _bounds(min_psnr: float | None, max_diff: float | None) -> str:
    parts = []
    if min_psnr is not None:
        parts.append(f"PSNR ≥ {figure_text(min_psnr)} dB")
    if max_diff is not None:
        parts.append(f"max |difference| ≤ {figure_text(max_diff)}")
    return ", ".join(parts) or "identical"


def compare_images(got: ImageLike, expected: ImageLike) -> Comparison:
    """PSNR and the largest pixel difference of got against expected (files or Images)."""
    g, e = as_image(got), as_image(expected)
    peak = e.peak
    if peak is None:
        s = stats(e)
        peak = s.maximum - s.minimum if s.finite and s.maximum > s.minimum else 1.0

    def failed(problem: str) -> Comparison:
        return Comparison(g, e, problem, None, None, None, peak)

    if (g.width, g.height, g.channels) != (e.width, e.height, e.channels):
        return failed(f"the sizes differ: got {g.shape}, expected {e.shape}")
    if g.peak is not None and e.peak is not None and g.peak != e.peak:
        return failed(f"the maxvals differ: got {figure_text(g.peak)}, expected {figure_text(e.peak)}")
    diffs = [_difference(gp, ep) for gp, ep in zip(g.planes, e.planes)]
    mse = sum(plane_mean(_square(d)) for d in diffs) / len(diffs)
    if not math.isfinite(mse):
        bad = g if not stats(g).finite else e
        return failed(f"{bad.source or 'a picture'} has NaN or infinite values")
    extrema = [value_range(d) for d in diffs]
    max_diff = max(max(-low, high) for low, high in extrema)
    psnr = math.inf if mse == 0.0 else 10.0 * math.log10(peak * peak / mse)
    return Comparison(g, e, "", max_diff, mse, psnr, peak)


def image_check(got: PathLike, expected: PathLike, label: str = "image",
                min_psnr: float | None = None, max_diff: float | None = None,
                raw: tuple[int, int, str] | None = None) -> CheckResult:
    """The `image` check kind: the file a program wrote against the one its solution wrote.

    raw: (width, height, dtype) for raw files; PGM/PPM otherwise. A missing or malformed file is
    a failed check with the reason, a missing solution picture an incomplete one; never an exception.
    """
    want = _bounds(min_psnr, max_diff)

    def load(path: PathLike) -> Image:
        return read_pnm(path) if raw is None else read_raw(path, *raw)

    name = Path(got).name
    if not Path(expected).is_file():
        return CheckResult(label, "incomplete", want, "",
                           f"the solution wrote no {Path(expected).name}: nothing to compare with")
    if not Path(got).is_file():
        return CheckResult(label, "fail", want, "no file", f"the program wrote no {name}")
    try:
        reference = load(expected)
    except ImageError as exc:
        return CheckResult(label, "incomplete", want, "", f"the solution's picture is unusable: {exc}")
    try:
        check_size(got, reference, raw)  # the header and the size first: no pixel read in vain
        picture = load(got)
    except ImageError as exc:
        return CheckResult(label, "fail", want, "unreadable", str(exc))
    picture = Image(picture.width, picture.height, picture.planes, picture.peak, name, picture.kind)
    return compare_images(picture, reference).check(label, min_psnr, max_diff)


# ---------------------------------------------------------------------------------------
# Showing


@dataclass(frozen=True)
class Pictures:
    """What `show` returns: one or more pictures in a row, each with a caption."""

    images: tuple[Image, ...]
    labels: tuple[str, ...]

    def __repr__(self) -> str:
        return "\n".join(f"{label}: {image!r}" for image, label in zip(self.images, self.labels))

    def _repr_png_(self) -> bytes:
        return png_bytes(strip_of([display_frame(i) for i in self.images], self.labels))

    def _repr_html_(self) -> str:
        return html_strip(self.images, self.labels)


# The pictures a notebook cell was to write (`--get`) when it did not run or failed, by absolute
# path, with why (the magic says so): showing one then says why it is missing, and the cell that
# shows it does not fail too, for a cause the cell above already reported (the `-m 2` cell on a
# machine without MPI, then its picture). A cell that runs well takes its names off again.
_NOT_WRITTEN: dict[str, str] = {}

NOT_WRITTEN = "{name}: not written: {why}"


def cell_outcome(paths: Sequence[PathLike], why: str | None) -> None:
    """What became of the files a cell was to write: `why` it failed, or None when it ran well."""
    for path in paths:
        key = os.path.abspath(path)
        if why is None:
            _NOT_WRITTEN.pop(key, None)
        else:
            _NOT_WRITTEN[key] = why


@dataclass(frozen=True)
class NotShown:
    """What `show` returns when its pictures are missing because the cell that writes them did
    not run: why, one line per picture."""

    reasons: tuple[str, ...]

    def __repr__(self) -> str:
        return "\n".join(self.reasons)

    def _repr_html_(self) -> str:
        return "".join(f"<p><b>not shown</b>: {html.escape(r)}</p>" for r in self.reasons)


def _not_written(items: Sequence[ImageLike]) -> NotShown | None:
    """Why the named pictures are missing, when each missing one was to come from a failed cell
    (None when any is missing for another reason, or none is missing)."""
    reasons: list[str] = []
    for item in items:
        if isinstance(item, Image) or (isinstance(item, str) and glob.has_magic(item)):
            continue
        key = os.path.abspath(item)
        if not os.path.exists(key):
            if key not in _NOT_WRITTEN:
                return None
            reasons.append(NOT_WRITTEN.format(name=os.fspath(item), why=_NOT_WRITTEN[key]))
    return NotShown(tuple(reasons)) if reasons else None


def _expand(item: ImageLike) -> list[Image]:
    if isinstance(item, Image):
        return [item]
    text = os.fspath(item)
    if isinstance(item, str) and glob.has_magic(text):
        matches = sorted(glob.glob(text))
        if not matches:
            raise ImageError(f"{text}: no file matches")
        return [read_pnm(m) for m in matches]
    return [read_pnm(item)]


def show(*items: ImageLike, labels: Sequence[str] | None = None) -> Pictures | NotShown:
    """Pictures to show in a row: Images, PGM/PPM paths, or patterns such as "life_*.pgm".

    The last expression of a notebook cell is displayed; a colour or gray picture larger than
    512 pixels is shrunk, a small one enlarged with square pixels. A picture that a failed cell
    of this kernel was to write (`--get`) and did not is not an error here: the result says why
    it is missing.
    """
    missing = _not_written(items)
    if missing is not None:
        return missing
    images = [image for item in items for image in _expand(item)]
    if not images:
        raise ImageError("show: nothing to show (give files, patterns or Images)")
    if labels is not None and len(labels) != len(images):
        raise ImageError(f"show: {len(labels)} labels for {len(images)} pictures")
    return Pictures(tuple(images), tuple(labels) if labels is not None else tuple(caption(i) for i in images))
