"""Pictures that course programs write: read them, compare them, show them in a notebook.

    read_pnm / read_raw                a file -> Image (PGM/PPM P2 P3 P5 P6, 8 and 16 bit; raw arrays)
    compare_images                     got, expected -> Comparison (PSNR, max |difference|, size mismatch)
    image_check                        the `image` check kind: two files -> CheckResult
    show                               one picture, or a strip of several, for a notebook cell

In a notebook, after `%%idrrun -a --get blur.pgm ...`:

    from idrrun.images import show, compare_images
    show("blur.pgm")                          # one picture
    show("life_*.pgm")                        # a strip, in file-name order
    compare_images("blur.pgm", "ref.pgm")     # got | expected | difference, with the figures

Pixels are kept as Pillow "F" images (32-bit floats, one per channel): Pillow is already a
dependency and does the per-pixel work in C, so a 4096x4096 picture from a GPU run compares in a
fraction of a second without numpy. 8- and 16-bit values, and integers up to 2**24, are exact in
that form; float64 raw data is compared in single precision.

The Netpbm header is parsed here rather than by Pillow's PPM plug-in: a course program that writes
a wrong header or the wrong number of bytes must get a message that says which, and how many.
"""

from __future__ import annotations

import array
import base64
import glob
import gzip
import html
import io
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont, ImageMath

from .model import CheckResult

# Raw array element types and the Pillow raw modes that decode them into "F" pixels
# (little-endian, big-endian).
RAW_DTYPES: dict[str, tuple[int, str, str]] = {
    "uint8": (1, "F;8", "F;8"),
    "int8": (1, "F;8S", "F;8S"),
    "uint16": (2, "F;16", "F;16B"),
    "int16": (2, "F;16S", "F;16BS"),
    "uint32": (4, "F;32", "F;32B"),
    "int32": (4, "F;32S", "F;32BS"),
    "float32": (4, "F;32F", "F;32BF"),
    "float64": (8, "F;64F", "F;64BF"),
}
ByteOrder = Literal["little", "big"]
PathLike = str | os.PathLike[str]

# Shown pictures: larger ones are shrunk to fit, smaller ones (a 64x64 Game of Life grid) are
# enlarged by a whole factor with square pixels so that every cell stays visible.
MAX_SHOWN = 512
MIN_SHOWN = 192


class ImageError(ValueError):
    """A file that is not the picture it should be; the message names the file and the problem."""


@dataclass(frozen=True)
class Image:
    """A picture: width x height pixels, one float32 plane per channel (1 gray, 3 colour)."""

    width: int
    height: int
    planes: tuple[PILImage.Image, ...]  # Pillow "F" images, never modified in place
    # The largest value the format allows (PNM maxval): the white of the display and the peak of
    # PSNR. None for raw data, whose range is taken from the values.
    peak: float | None
    source: str  # where it came from, for messages: "blur.pgm"
    kind: str  # "P5, 8-bit gray", "raw float32"

    @property
    def channels(self) -> int:
        return len(self.planes)

    @property
    def shape(self) -> str:
        colour = "gray" if self.channels == 1 else "colour" if self.channels == 3 else f"{self.channels} channels"
        return f"{self.width}×{self.height} {colour}"

    def stats(self) -> Stats:
        return stats(self)

    def __repr__(self) -> str:
        s = self.stats()
        values = f"min {_fmt(s.minimum)}, max {_fmt(s.maximum)}, mean {_fmt(s.mean)}"
        if not s.finite:
            values += ", has NaN or infinite values"
        return f"<Image {self.source or 'in memory'}: {self.shape}, {self.kind}; {values}>"

    def _repr_png_(self) -> bytes:
        return _png(_strip([_frame(self)], [_label(self)]))

    def _repr_html_(self) -> str:
        return _html_strip([self], [_label(self)])


@dataclass(frozen=True)
class Stats:
    minimum: float
    maximum: float
    mean: float  # NaN when a pixel is NaN or infinite

    @property
    def finite(self) -> bool:
        return math.isfinite(self.mean)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


# ---------------------------------------------------------------------------------------
# Reading


def _planes(data: bytes, width: int, height: int, channels: int, rawmode: str) -> tuple[PILImage.Image, ...]:
    """Interleaved samples (RGBRGB...) decoded by Pillow, then split into one plane per channel."""
    whole = PILImage.frombytes("F", (width * channels, height), data, "raw", rawmode)
    if channels == 1:
        return (whole,)
    floats = array.array("f", whole.tobytes())  # native float32, as Pillow keeps "F" pixels
    return tuple(PILImage.frombytes("F", (width, height), floats[c::channels].tobytes())
                 for c in range(channels))


def rows(image: Image, channel: int = 0) -> list[list[float]]:
    """One channel's pixels as a list of rows."""
    values = array.array("f", image.planes[channel].tobytes())
    return [values[y * image.width:(y + 1) * image.width].tolist() for y in range(image.height)]


def _header_tokens(data: bytes, name: str, count: int) -> tuple[list[int], int]:
    """The header's numbers after the magic number, and the offset just past the last one."""
    tokens: list[int] = []
    pos = 2
    while len(tokens) < count:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if pos < len(data) and data[pos:pos + 1] == b"#":
            end = data.find(b"\n", pos)
            pos = len(data) if end < 0 else end + 1
            continue
        start = pos
        while pos < len(data) and not data[pos:pos + 1].isspace() and data[pos:pos + 1] != b"#":
            pos += 1
        word = data[start:pos]
        what = ("width", "height", "maxval")[len(tokens)]
        if not word:
            raise ImageError(f"{name}: the header ends before its {what}")
        if not word.isdigit():
            raise ImageError(f"{name}: the header's {what} is {word[:20]!r}, not a positive integer")
        tokens.append(int(word))
    return tokens, pos


@dataclass(frozen=True)
class _PnmHeader:
    magic: str  # P2, P3, P5, P6
    width: int
    height: int
    maxval: int
    channels: int

    @property
    def samples(self) -> int:
        return self.width * self.height * self.channels

    @property
    def sample_bytes(self) -> int:
        """Of a binary sample: 16-bit values take two bytes, most significant first."""
        return 1 if self.maxval < 256 else 2

    @property
    def described(self) -> str:
        """What the header promised, as the messages say it: "40×24 8-bit gray"."""
        return f"{self.width}×{self.height} {self.depth} {self.colour}"

    @property
    def kind(self) -> str:
        return f"{self.magic}, {self.depth} {self.colour}"

    @property
    def depth(self) -> str:
        return "8-bit" if self.sample_bytes == 1 else "16-bit"

    @property
    def colour(self) -> str:
        return "gray" if self.channels == 1 else "colour"


def _pnm_header(data: bytes, name: str, channels: int) -> tuple[_PnmHeader, int]:
    """The header, checked, and the offset just past its maxval."""
    (width, height, maxval), pos = _header_tokens(data, name, 3)
    if width < 1 or height < 1:
        raise ImageError(f"{name}: the header gives a size of {width}×{height}")
    if not 1 <= maxval <= 65535:
        raise ImageError(f"{name}: the header's maxval is {maxval}; it must be 1 to 65535")
    return _PnmHeader(data[:2].decode(), width, height, maxval, channels), pos


def _plain_pixels(data: bytes, pos: int, header: _PnmHeader, name: str) -> tuple[bytes, str]:
    """P2, P3: the values as decimal words, comments allowed among them -> float32 raster."""
    words = b" ".join(line.split(b"#", 1)[0] for line in data[pos:].splitlines()).split()
    samples = header.samples
    if len(words) < samples:
        raise ImageError(f"{name}: truncated: the header says {header.described} ({samples} values), "
                         f"the file has {len(words)}")
    if len(words) > samples:
        raise ImageError(f"{name}: {len(words)} values where the header says {header.described} "
                         f"({samples} values)")
    try:
        values = [int(w) for w in words]
    except ValueError:
        bad = next(w for w in words if not w.isdigit())
        raise ImageError(f"{name}: {bad[:20]!r} is not a pixel value (non-negative integer)") from None
    return array.array("f", values).tobytes(), "F"


def _binary_pixels(data: bytes, pos: int, header: _PnmHeader, name: str) -> tuple[bytes, str]:
    """P5, P6: one whitespace character after maxval, then exactly the samples' bytes."""
    if pos >= len(data) or not data[pos:pos + 1].isspace():
        raise ImageError(f"{name}: the header's maxval must be followed by one whitespace "
                         "character, then the pixels")
    raster = data[pos + 1:]
    size = header.sample_bytes
    want = header.samples * size
    if len(raster) < want:
        raise ImageError(f"{name}: truncated: the header says {header.described}, that is {want} bytes "
                         f"of pixels; the file has {len(raster)}")
    if len(raster) > want:
        raise ImageError(f"{name}: {len(raster)} bytes of pixels where the header says "
                         f"{header.described} ({want} bytes): do the header and the values written "
                         f"agree (size, {size}-byte samples)?")
    return raster, "F;8" if size == 1 else "F;16B"


_PixelReader = Callable[[bytes, int, _PnmHeader, str], tuple[bytes, str]]
# The Netpbm formats read: magic number -> (channels, the reader of the pixels after the header).
_PNM_FORMATS: dict[bytes, tuple[int, _PixelReader]] = {
    b"P2": (1, _plain_pixels),
    b"P3": (3, _plain_pixels),
    b"P5": (1, _binary_pixels),
    b"P6": (3, _binary_pixels),
}


def _pnm_format(data: bytes, name: str) -> tuple[int, _PixelReader]:
    magic = data[:2]
    if magic in (b"P1", b"P4"):
        raise ImageError(f"{name}: a {magic.decode()} bitmap (PBM) is not supported: write a PGM "
                         "(P2 or P5) with maxval 1")
    if magic not in _PNM_FORMATS:
        shown = repr(data[:16]) if data else "an empty file"
        raise ImageError(f"{name}: not a PGM/PPM file: it should start with P2, P3, P5 or P6, "
                         f"it starts with {shown}")
    return _PNM_FORMATS[magic]


def parse_pnm(data: bytes, name: str = "image") -> Image:
    """A PGM or PPM file's bytes -> Image; ImageError says what is wrong with a bad one."""
    channels, read_pixels = _pnm_format(data, name)
    header, pos = _pnm_header(data, name, channels)
    raster, mode = read_pixels(data, pos, header, name)
    planes = _planes(raster, header.width, header.height, channels, mode)
    top = max(_extrema(p)[1] for p in planes)
    if top > header.maxval:
        raise ImageError(f"{name}: a pixel is {top:g}, above the header's maxval {header.maxval}")
    return Image(header.width, header.height, planes, float(header.maxval), name, header.kind)


def parse_raw(data: bytes, width: int, height: int, dtype: str, channels: int = 1,
              byteorder: ByteOrder = "little", name: str = "raw data") -> Image:
    """Raw array bytes (row after row, channels interleaved) -> Image."""
    if dtype not in RAW_DTYPES:
        raise ImageError(f"{name}: unknown dtype {dtype!r} (known: {', '.join(RAW_DTYPES)})")
    if width < 1 or height < 1 or channels < 1:
        raise ImageError(f"{name}: width, height and channels must be positive, got "
                         f"{width}×{height}×{channels}")
    size, little, big = RAW_DTYPES[dtype]
    want = width * height * channels * size
    if len(data) != want:
        problem = "truncated" if len(data) < want else "too large"
        fits = ""
        if len(data) % (size * channels) == 0 and len(data) // (size * channels) != width * height:
            fits = f" ({len(data) // (size * channels)} values of {dtype})"
        raise ImageError(f"{name}: {problem}: {width}×{height}"
                         f"{f'×{channels}' if channels > 1 else ''} {dtype} is {want} bytes, "
                         f"the file has {len(data)}{fits}")
    planes = _planes(data, width, height, channels, little if byteorder == "little" else big)
    return Image(width, height, planes, None, name, f"raw {dtype}")


# A gzip-compressed picture (a course's reference keeps a large one so) is read up to this size.
MAX_UNPACKED = 1 << 30


def _read(path: PathLike) -> tuple[bytes, str]:
    name = os.fspath(path)
    try:
        if name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                data = fh.read(MAX_UNPACKED + 1)
            if len(data) > MAX_UNPACKED:
                raise ImageError(f"{name}: more than {MAX_UNPACKED >> 20} MiB once uncompressed")
            return data, name[:-3]
        return Path(path).read_bytes(), name
    except FileNotFoundError:
        raise ImageError(f"{name}: no such file (did the program write it? --get {Path(name).name} "
                         "reports it)") from None
    except (OSError, EOFError) as exc:  # gzip's BadGzipFile is an OSError
        raise ImageError(f"{name}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def read_pnm(path: PathLike) -> Image:
    data, name = _read(path)
    return parse_pnm(data, name)


def read_raw(path: PathLike, width: int, height: int, dtype: str, channels: int = 1,
             byteorder: ByteOrder = "little") -> Image:
    data, name = _read(path)
    return parse_raw(data, width, height, dtype, channels, byteorder, name)


ImageLike = Image | PathLike


def _image(item: ImageLike) -> Image:
    return item if isinstance(item, Image) else read_pnm(item)


# ---------------------------------------------------------------------------------------
# Figures


def _mean(plane: PILImage.Image) -> float:
    # A box filter down to one pixel is the mean; Pillow accumulates it in double precision.
    value = plane.resize((1, 1), PILImage.Resampling.BOX).getpixel((0, 0))
    assert isinstance(value, float)
    return value


def _extrema(plane: PILImage.Image) -> tuple[float, float]:
    # An "F" image's extrema are two floats (Pillow's annotation also covers per-band tuples).
    low, high = plane.getextrema()
    assert isinstance(low, float) and isinstance(high, float)
    return low, high


def stats(image: Image) -> Stats:
    extrema = [_extrema(p) for p in image.planes]
    return Stats(minimum=min(e[0] for e in extrema), maximum=max(e[1] for e in extrema),
                 mean=sum(_mean(p) for p in image.planes) / image.channels)


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
        return f"PSNR {self.psnr:.1f} dB, max |difference| {_fmt(self.max_diff)}"

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
            why.append(f"PSNR {self.psnr:.1f} dB below {_fmt(min_psnr)} dB")
        if max_diff is not None and self.max_diff > max_diff:
            why.append(f"a pixel differs by {_fmt(self.max_diff)} (at most {_fmt(max_diff)} allowed)")
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
        return _png(_strip(frames, labels, footer=self.figures()))

    def _repr_html_(self) -> str:
        frames, labels = self._frames()
        return _html_frames(frames, labels, footer=self.figures())

    def _frames(self) -> tuple[list[PILImage.Image], list[str]]:
        frames = [_frame(self.got), _frame(self.expected)]
        labels = [f"got: {_label(self.got)}", f"expected: {_label(self.expected)}"]
        if not self.problem and self.max_diff is not None:
            diffs = tuple(_abs(_difference(g, e)) for g, e in zip(self.got.planes, self.expected.planes))
            # The difference is stretched to its own maximum (white) so that small errors show.
            top = self.max_diff if self.max_diff > 0 else 1.0
            shown = Image(self.got.width, self.got.height, diffs, top, "difference", "|got - expected|")
            frames.append(_frame(shown))
            labels.append(f"|difference|: black 0, white {_fmt(self.max_diff)}"
                          if self.max_diff > 0 else "|difference|: all 0")
        return frames, labels


def _bounds(min_psnr: float | None, max_diff: float | None) -> str:
    parts = []
    if min_psnr is not None:
        parts.append(f"PSNR ≥ {_fmt(min_psnr)} dB")
    if max_diff is not None:
        parts.append(f"max |difference| ≤ {_fmt(max_diff)}")
    return ", ".join(parts) or "identical"


def compare_images(got: ImageLike, expected: ImageLike) -> Comparison:
    """PSNR and the largest pixel difference of got against expected (files or Images)."""
    g, e = _image(got), _image(expected)
    peak = e.peak
    if peak is None:
        s = stats(e)
        peak = s.maximum - s.minimum if s.finite and s.maximum > s.minimum else 1.0

    def failed(problem: str) -> Comparison:
        return Comparison(g, e, problem, None, None, None, peak)

    if (g.width, g.height, g.channels) != (e.width, e.height, e.channels):
        return failed(f"the sizes differ: got {g.shape}, expected {e.shape}")
    if g.peak is not None and e.peak is not None and g.peak != e.peak:
        return failed(f"the maxvals differ: got {_fmt(g.peak)}, expected {_fmt(e.peak)}")
    diffs = [_difference(gp, ep) for gp, ep in zip(g.planes, e.planes)]
    mse = sum(_mean(_square(d)) for d in diffs) / len(diffs)
    if not math.isfinite(mse):
        bad = g if not stats(g).finite else e
        return failed(f"{bad.source or 'a picture'} has NaN or infinite values")
    extrema = [_extrema(d) for d in diffs]
    max_diff = max(max(-low, high) for low, high in extrema)
    psnr = math.inf if mse == 0.0 else 10.0 * math.log10(peak * peak / mse)
    return Comparison(g, e, "", max_diff, mse, psnr, peak)


# What is read of a picture before its pixels: its header (a comment may sit in it).
HEADER_BYTES = 4096
# A plain (P2, P3) picture's bytes per sample at most: five digits and a few spaces or a short
# comment; past that it is not a picture of the header's size.
PLAIN_BYTES_PER_SAMPLE = 12


def _fits(got: PathLike, reference: Image, raw: tuple[int, int, str] | None) -> None:
    """Raise ImageError when the picture `got` cannot be the solution's, from its header and its
    file's size alone, before its pixels are read: the solution's picture bounds the student's
    (a 256 MB picture of 16000×16000 pixels against a 512×512 one costs the grader nothing).
    A file no larger than the solution's picture may be is left to the comparison."""
    if os.fspath(got).endswith(".gz"):
        return  # read within MAX_UNPACKED by _read
    name = Path(got).name  # (the grader's folder is no business of the student's feedback)
    try:
        with open(got, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(HEADER_BYTES)
    except OSError:
        return  # load() says what is wrong with it
    if raw is not None:
        width, height, dtype = raw
        item = RAW_DTYPES.get(dtype, (1, "", ""))[0]
        want = width * height * reference.channels * item
        if size > want:
            raise ImageError(f"{name}: too large: {width}×{height} {dtype} is {want} bytes, the "
                             f"file has {size}")
        return
    if size <= reference.width * reference.height * reference.channels * PLAIN_BYTES_PER_SAMPLE \
            + HEADER_BYTES:
        return  # no larger than the solution's picture may be: read and compared as it is
    channels, read_pixels = _pnm_format(head, name)
    header, pos = _pnm_header(head, name, channels)
    if (header.width, header.height, channels) != (reference.width, reference.height,
                                                   reference.channels):
        raise ImageError(f"{name}: the sizes differ: got {header.width}×{header.height} "
                         f"{header.colour}, expected {reference.shape} (its pixels were not read)")
    if read_pixels is _binary_pixels:
        want = pos + 1 + header.samples * header.sample_bytes
        if size > want:
            raise ImageError(f"{name}: {size} bytes where the header says {header.described}, "
                             f"that is {want} bytes with the header: do the header and the "
                             "values written agree?")
    elif size > header.samples * PLAIN_BYTES_PER_SAMPLE + HEADER_BYTES:
        raise ImageError(f"{name}: {size} bytes, far more than the {header.samples} values of "
                         f"{header.described} take")


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
        _fits(got, reference, raw)  # the header and the size first: no pixel read in vain
        picture = load(got)
    except ImageError as exc:
        return CheckResult(label, "fail", want, "unreadable", str(exc))
    picture = Image(picture.width, picture.height, picture.planes, picture.peak, name, picture.kind)
    return compare_images(picture, reference).check(label, min_psnr, max_diff)


# ---------------------------------------------------------------------------------------
# Showing


def _display_range(image: Image) -> tuple[float, float]:
    if image.peak is not None:
        return 0.0, image.peak
    s = stats(image)
    return (s.minimum, s.maximum) if s.maximum > s.minimum else (s.minimum, s.minimum + 1.0)


def _label(image: Image) -> str:
    low, high = _display_range(image)
    name = Path(image.source).name if image.source else "image"
    return f"{name} ({image.width}×{image.height}, black {_fmt(low)}, white {_fmt(high)})"


def _frame(image: Image) -> PILImage.Image:
    """An 8-bit picture of the image ("L" or "RGB"), scaled for the screen."""
    low, high = _display_range(image)
    scale = 255.0 / (high - low)
    planes = [p.point(lambda v: v * scale + (0.5 - low * scale)).convert("L") for p in image.planes]
    picture = planes[0] if len(planes) != 3 else PILImage.merge("RGB", planes)
    side = max(image.width, image.height)
    if side > MAX_SHOWN:
        factor = MAX_SHOWN / side
        size = (max(1, round(image.width * factor)), max(1, round(image.height * factor)))
        return picture.resize(size, PILImage.Resampling.BOX)
    if side < MIN_SHOWN:
        times = -(-MIN_SHOWN // side)
        return picture.resize((image.width * times, image.height * times), PILImage.Resampling.NEAREST)
    return picture


def _png(picture: PILImage.Image) -> bytes:
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


# Pillow's built-in font has no glyph for these: the PNG (not the HTML) spells them out.
_PLAIN = str.maketrans({"×": "x", "∞": "inf", "≥": ">=", "≤": "<=", "²": "^2"})


def _strip(frames: Sequence[PILImage.Image], labels: Sequence[str], footer: str = "") -> PILImage.Image:
    """Frames side by side on white, each with its label below, and one footer line."""
    font = ImageFont.load_default()
    gap, line = 8, 14
    width = sum(f.width for f in frames) + gap * (len(frames) + 1)
    height = max(f.height for f in frames) + 2 * gap + line + (line if footer else 0)
    sheet = PILImage.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(sheet)
    x = gap
    top = max(f.height for f in frames)
    for frame, label in zip(frames, labels):
        sheet.paste(frame.convert("RGB"), (x, gap))
        draw.text((x, gap + top + 2), label.translate(_PLAIN), fill="black", font=font)
        x += frame.width + gap
    if footer:
        draw.text((gap, gap + top + 2 + line), footer.translate(_PLAIN), fill="black", font=font)
    return sheet


def _html_frames(frames: Sequence[PILImage.Image], labels: Sequence[str], footer: str = "") -> str:
    figures = []
    for frame, label in zip(frames, labels):
        data = base64.b64encode(_png(frame)).decode("ascii")
        figures.append(
            "<figure style='margin:0'>"
            f"<img alt='{html.escape(label, quote=True)}' width='{frame.width}' height='{frame.height}' "
            f"style='image-rendering:pixelated' src='data:image/png;base64,{data}'/>"
            f"<figcaption style='font-size:small'>{html.escape(label)}</figcaption></figure>")
    text = f"<div style='margin-top:4px'>{html.escape(footer)}</div>" if footer else ""
    return ("<div class='idrrun-images'><div style='display:flex;flex-wrap:wrap;gap:8px;"
            f"align-items:flex-start'>{''.join(figures)}</div>{text}</div>")


def _html_strip(images: Sequence[Image], labels: Sequence[str]) -> str:
    return _html_frames([_frame(i) for i in images], labels)


@dataclass(frozen=True)
class Pictures:
    """What `show` returns: one or more pictures in a row, each with a caption."""

    images: tuple[Image, ...]
    labels: tuple[str, ...]

    def __repr__(self) -> str:
        return "\n".join(f"{label}: {image!r}" for image, label in zip(self.images, self.labels))

    def _repr_png_(self) -> bytes:
        return _png(_strip([_frame(i) for i in self.images], self.labels))

    def _repr_html_(self) -> str:
        return _html_strip(self.images, self.labels)


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
    return Pictures(tuple(images), tuple(labels) if labels is not None else tuple(_label(i) for i in images))
