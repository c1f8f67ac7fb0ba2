"""A picture that a course program wrote: read from its file into an `Image` (Netpbm PGM/PPM
P2 P3 P5 P6, 8 and 16 bit; raw arrays), its figures (`stats`), and drawn for a notebook (PNG or
HTML, with its caption). idrrun/images.py compares pictures and shows them.

    read_pnm / read_raw                a file -> Image
    parse_pnm / parse_raw              bytes -> Image
    check_size                         a file's header and size against the solution's picture

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
from PIL import ImageDraw, ImageFont


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
        values = f"min {figure_text(s.minimum)}, max {figure_text(s.maximum)}, mean {figure_text(s.mean)}"
        if not s.finite:
            values += ", has NaN or infinite values"
        return f"<Image {self.source or 'in memory'}: {self.shape}, {self.kind}; {values}>"

    def _repr_png_(self) -> bytes:
        return png_bytes(strip_of([display_frame(self)], [caption(self)]))

    def _repr_html_(self) -> str:
        return html_strip([self], [caption(self)])


@dataclass(frozen=True)
class Stats:
    minimum: float
    maximum: float
    mean: float  # NaN when a pixel is NaN or infinite

    @property
    def finite(self) -> bool:
        return math.isfinite(self.mean)


def figure_text(x: float) -> str:
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
    top = max(value_range(p)[1] for p in planes)
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


def as_image(item: ImageLike) -> Image:
    return item if isinstance(item, Image) else read_pnm(item)


# ---------------------------------------------------------------------------------------
# Figures


def plane_mean(plane: PILImage.Image) -> float:
    # A box filter down to one pixel is the mean; Pillow accumulates it in double precision.
    value = plane.resize((1, 1), PILImage.Resampling.BOX).getpixel((0, 0))
    assert isinstance(value, float)
    return value


def value_range(plane: PILImage.Image) -> tuple[float, float]:
    # An "F" image's extrema are two floats (Pillow's annotation also covers per-band tuples).
    low, high = plane.getextrema()
    assert isinstance(low, float) and isinstance(high, float)
    return low, high


def stats(image: Image) -> Stats:
    extrema = [value_range(p) for p in image.planes]
    return Stats(minimum=min(e[0] for e in extrema), maximum=max(e[1] for e in extrema),
                 mean=sum(plane_mean(p) for p in image.planes) / image.channels)


# ---------------------------------------------------------------------------------------
# Drawing


def _display_range(image: Image) -> tuple[float, float]:
    if image.peak is not None:
        return 0.0, image.peak
    s = stats(image)
    return (s.minimum, s.maximum) if s.maximum > s.minimum else (s.minimum, s.minimum + 1.0)


def caption(image: Image) -> str:
    low, high = _display_range(image)
    name = Path(image.source).name if image.source else "image"
    return f"{name} ({image.width}×{image.height}, black {figure_text(low)}, white {figure_text(high)})"


def display_frame(image: Image) -> PILImage.Image:
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


def png_bytes(picture: PILImage.Image) -> bytes:
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


# Pillow's built-in font has no glyph for these: the PNG (not the HTML) spells them out.
_PLAIN = str.maketrans({"×": "x", "∞": "inf", "≥": ">=", "≤": "<=", "²": "^2"})


def strip_of(frames: Sequence[PILImage.Image], labels: Sequence[str], footer: str = "") -> PILImage.Image:
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


def html_frames(frames: Sequence[PILImage.Image], labels: Sequence[str], footer: str = "") -> str:
    figures = []
    for frame, label in zip(frames, labels):
        data = base64.b64encode(png_bytes(frame)).decode("ascii")
        figures.append(
            "<figure style='margin:0'>"
            f"<img alt='{html.escape(label, quote=True)}' width='{frame.width}' height='{frame.height}' "
            f"style='image-rendering:pixelated' src='data:image/png;base64,{data}'/>"
            f"<figcaption style='font-size:small'>{html.escape(label)}</figcaption></figure>")
    text = f"<div style='margin-top:4px'>{html.escape(footer)}</div>" if footer else ""
    return ("<div class='idrrun-images'><div style='display:flex;flex-wrap:wrap;gap:8px;"
            f"align-items:flex-start'>{''.join(figures)}</div>{text}</div>")


def html_strip(images: Sequence[Image], labels: Sequence[str]) -> str:
    return html_frames([display_frame(i) for i in images], labels)


# ---------------------------------------------------------------------------------------
# The solution's picture bounds the student's


# What is read of a picture before its pixels: its header (a comment may sit in it).
HEADER_BYTES = 4096


# A plain (P2, P3) picture's bytes per sample at most: five digits and a few spaces or a short
# comment; past that it is not a picture of the header's size.
PLAIN_BYTES_PER_SAMPLE = 12


def check_size(got: PathLike, reference: Image, raw: tuple[int, int, str] | None) -> None:
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
