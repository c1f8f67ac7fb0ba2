"""idrrun.images: pictures written by real C programs (gcc), read, compared and shown.

The files come from a small C program compiled here, as a course program would write them; the
expected pixels are computed again in Python from the same formulas. Bad files (truncated, wrong
header, wrong size) must give an ImageError that says what is wrong, never another exception.
"""

from __future__ import annotations

import array
import base64
import io
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image as PILImage

from conftest import Kernel, ROOT
from idrrun import pictures
from idrrun.images import compare_images, image_check, show
from idrrun.pictures import Image, ImageError


def from_rows(rows: list[list[float]], peak: float | None = None, source: str = "") -> Image:
    """A gray picture from a list of rows, e.g. `from_rows([[0, 1], [1, 0]], peak=1)`."""
    width, height = len(rows[0]), len(rows)
    data = array.array("f", (float(v) for row in rows for v in row)).tobytes()
    return Image(width, height, (PILImage.frombytes("F", (width, height), data),), peak, source, "values")

W, H = 40, 24

WRITER = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 40
#define H 24

/* the pixel formulas; test_images.py computes the same in Python */
static int gray8(int x, int y) { return (x * 6 + y * 3) % 256; }
static int gray16(int x, int y) { return x * 1500 + y * 17; }
static double wave(int x, int y) { return sin(0.3 * x) * cos(0.2 * y); }

static void put16(FILE *f, int v) { fputc(v >> 8, f); fputc(v & 255, f); }

int main(int argc, char **argv)
{
    const char *kind = argv[1];
    FILE *f = fopen(argv[2], "wb");
    if (!f) return 1;
    if (!strcmp(kind, "p5")) {
        fprintf(f, "P5\n# written by the test\n%d %d\n255\n", W, H);
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) fputc(gray8(x, y), f);
    } else if (!strcmp(kind, "p5_16")) {
        fprintf(f, "P5 %d %d 65535\n", W, H);
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) put16(f, gray16(x, y));
    } else if (!strcmp(kind, "p2")) {
        fprintf(f, "P2\n%d %d # size\n255\n", W, H);
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) fprintf(f, "%d ", gray8(x, y));
            fprintf(f, "\n");
        }
    } else if (!strcmp(kind, "p3")) {
        fprintf(f, "P3\n%d %d\n255\n", W, H);
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++)
            fprintf(f, "%d %d %d\n", x, y, 255 - x);
    } else if (!strcmp(kind, "p6")) {
        fprintf(f, "P6\n%d %d\n255\n", W, H);
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
            fputc(x, f); fputc(y, f); fputc(255 - x, f);
        }
    } else if (!strcmp(kind, "p6_16")) {
        fprintf(f, "P6\n%d %d\n4095\n", W, H);
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
            put16(f, 100 * x); put16(f, 100 * y); put16(f, 4095 - 100 * x);
        }
    } else if (!strcmp(kind, "float32") || !strcmp(kind, "float64")) {
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
            double v = wave(x, y);
            float s = (float)v;
            if (kind[5] == '3') fwrite(&s, sizeof s, 1, f); else fwrite(&v, sizeof v, 1, f);
        }
    } else if (!strcmp(kind, "uint16")) {
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
            unsigned short v = (unsigned short)gray16(x, y);
            fwrite(&v, sizeof v, 1, f);
        }
    } else if (!strcmp(kind, "truncated")) {          /* the program stopped half way */
        fprintf(f, "P5\n%d %d\n255\n", W, H);
        for (int i = 0; i < W * H / 2; i++) fputc(1, f);
    } else if (!strcmp(kind, "ints")) {               /* ints written where bytes were meant */
        fprintf(f, "P5\n%d %d\n255\n", W, H);
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
            int v = gray8(x, y);
            fwrite(&v, sizeof v, 1, f);
        }
    } else if (!strcmp(kind, "magic")) {              /* a PFM-like header */
        fprintf(f, "Pf\n%d %d\n-1.0\n", W, H);
    } else if (!strcmp(kind, "header")) {
        fprintf(f, "P5\n%d height\n255\n", W);
    } else if (!strcmp(kind, "maxval")) {
        fprintf(f, "P2\n2 1\n100\n50 200\n");
    } else if (!strcmp(kind, "short_header")) {
        fprintf(f, "P2\n%d", W);
    } else if (!strcmp(kind, "plain_words")) {
        fprintf(f, "P2\n2 2\n255\n1 2\n3 x4\n");
    }
    fclose(f);
    return 0;
}
"""


def gray8(x: int, y: int) -> int:
    return (x * 6 + y * 3) % 256


def gray16(x: int, y: int) -> int:
    return x * 1500 + y * 17


def wave(x: int, y: int) -> float:
    return math.sin(0.3 * x) * math.cos(0.2 * y)


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    folder = tmp_path_factory.mktemp("writer")
    (folder / "writer.c").write_text(WRITER)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(folder / "writer"), str(folder / "writer.c"), "-lm"],
                   check=True, capture_output=True, timeout=60)
    return folder / "writer"


def written(writer: Path, kind: str, folder: Path, name: str | None = None) -> Path:
    path = folder / (name or f"{kind}.img")
    subprocess.run([str(writer), kind, str(path)], check=True, timeout=30)
    return path


def expected_rows(f: object) -> list[list[float]]:
    assert callable(f)
    return [[float(f(x, y)) for x in range(W)] for y in range(H)]


# ---------------------------------------------------------------------------------------
# Files a C program wrote


@pytest.mark.parametrize("kind", ["p5", "p2"])
def test_8bit_gray_from_c(writer: Path, tmp_path: Path, kind: str) -> None:
    image = pictures.read_pnm(written(writer, kind, tmp_path))
    assert (image.width, image.height, image.channels, image.peak) == (W, H, 1, 255.0)
    assert pictures.rows(image) == expected_rows(gray8)
    assert image.kind == f"{kind.upper()}, 8-bit gray"


def test_16bit_gray_from_c(writer: Path, tmp_path: Path) -> None:
    image = pictures.read_pnm(written(writer, "p5_16", tmp_path))
    assert image.peak == 65535.0 and image.kind == "P5, 16-bit gray"
    assert pictures.rows(image) == expected_rows(gray16)


@pytest.mark.parametrize("kind", ["p6", "p3"])
def test_8bit_colour_from_c(writer: Path, tmp_path: Path, kind: str) -> None:
    image = pictures.read_pnm(written(writer, kind, tmp_path))
    assert image.channels == 3 and image.shape == f"{W}×{H} colour"
    assert pictures.rows(image, 0)[5] == [float(x) for x in range(W)]
    assert [r[3] for r in pictures.rows(image, 1)] == [float(y) for y in range(H)]
    assert pictures.rows(image, 2)[0][:3] == [255.0, 254.0, 253.0]


def test_16bit_colour_from_c(writer: Path, tmp_path: Path) -> None:
    image = pictures.read_pnm(written(writer, "p6_16", tmp_path))
    assert image.peak == 4095.0 and image.kind == "P6, 16-bit colour"
    assert pictures.rows(image, 0)[0][:3] == [0.0, 100.0, 200.0]
    assert pictures.rows(image, 2)[0][:2] == [4095.0, 3995.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_raw_floats_from_c(writer: Path, tmp_path: Path, dtype: str) -> None:
    image = pictures.read_raw(written(writer, dtype, tmp_path), W, H, dtype)
    assert image.peak is None and image.kind == f"raw {dtype}"
    got = pictures.rows(image)
    for y in range(H):
        for x in range(W):
            assert got[y][x] == pytest.approx(wave(x, y), abs=1e-7)


def test_raw_uint16_from_c(writer: Path, tmp_path: Path) -> None:
    image = pictures.read_raw(written(writer, "uint16", tmp_path), W, H, "uint16")
    assert pictures.rows(image) == expected_rows(gray16)


def test_same_picture_in_two_formats_is_identical(writer: Path, tmp_path: Path) -> None:
    result = compare_images(written(writer, "p5", tmp_path), written(writer, "p2", tmp_path))
    assert result.identical and result.psnr == math.inf and result.max_diff == 0.0
    assert result.passes() and result.passes(min_psnr=40, max_diff=0)
    assert "identical" in result.figures()


# ---------------------------------------------------------------------------------------
# Bad files: a clear ImageError, never another exception


@pytest.mark.parametrize("kind, message", [
    ("truncated", r"truncated: the header says 40×24 8-bit gray, that is 960 bytes of pixels; the file has 480"),
    ("ints", r"3840 bytes of pixels where the header says 40×24 8-bit gray \(960 bytes\)"),
    ("magic", r"not a PGM/PPM file: it should start with P2, P3, P5 or P6, it starts with b'Pf"),
    ("header", r"the header's height is b'height', not a positive integer"),
    ("maxval", r"a pixel is 200, above the header's maxval 100"),
    ("short_header", r"the header ends before its height"),
    ("plain_words", r"b'x4' is not a pixel value"),
])
def test_bad_files_from_c(writer: Path, tmp_path: Path, kind: str, message: str) -> None:
    path = written(writer, kind, tmp_path)
    with pytest.raises(ImageError, match=message) as info:
        pictures.read_pnm(path)
    assert str(info.value).startswith(str(path))


def test_raw_of_the_wrong_size(writer: Path, tmp_path: Path) -> None:
    path = written(writer, "float64", tmp_path)
    with pytest.raises(ImageError, match=r"too large: 40×24 float32 is 3840 bytes, the file has 7680 "
                                         r"\(1920 values of float32\)"):
        pictures.read_raw(path, W, H, "float32")
    with pytest.raises(ImageError, match=r"truncated: 80×24 float64 is 15360 bytes, the file has 7680"):
        pictures.read_raw(path, 2 * W, H, "float64")
    with pytest.raises(ImageError, match="unknown dtype 'double'"):
        pictures.read_raw(path, W, H, "double")


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"out\.pgm: no such file \(did the program write it\?"):
        pictures.read_pnm(tmp_path / "out.pgm")
    (tmp_path / "empty.pgm").write_bytes(b"")
    with pytest.raises(ImageError, match="it starts with an empty file"):
        pictures.read_pnm(tmp_path / "empty.pgm")
    with pytest.raises(ImageError, match="cannot be read"):
        pictures.read_pnm(tmp_path)  # a folder
    (tmp_path / "zero.pgm").write_bytes(b"P5 0 4 255\n")
    with pytest.raises(ImageError, match="a size of 0×4"):
        pictures.read_pnm(tmp_path / "zero.pgm")
    (tmp_path / "big.pgm").write_bytes(b"P5 1 1 70000\n\0\0")
    with pytest.raises(ImageError, match="maxval is 70000"):
        pictures.read_pnm(tmp_path / "big.pgm")
    (tmp_path / "glued.pgm").write_bytes(b"P5 1 1 255")
    with pytest.raises(ImageError, match="followed by one whitespace"):
        pictures.read_pnm(tmp_path / "glued.pgm")


@pytest.mark.parametrize("data, message", [
    (b"P1\n2 2\n0 1 1 0\n", r"a P1 bitmap \(PBM\) is not supported: write a PGM \(P2 or P5\) with maxval 1"),
    (b"P4\n8 1\n\xff", r"a P4 bitmap \(PBM\)"),
    (b"P2 2 2 255\n1 2 3\n", r"truncated: the header says 2×2 8-bit gray \(4 values\), the file has 3"),
    (b"P3 1 1 255\n1 2 3 4\n", r"4 values where the header says 1×1 8-bit colour \(3 values\)"),
    (b"P5 2 1 1000\n\0\1\0", r"truncated: the header says 2×1 16-bit gray, that is 4 bytes of pixels; "
                             r"the file has 3"),
    (b"P6 1 1 255\n\1\2\3\4", r"4 bytes of pixels where the header says 1×1 8-bit colour \(3 bytes\): "
                              r"do the header and the values written agree \(size, 1-byte samples\)\?"),
    (b"P2 1 1 9\n10\n", r"a pixel is 10, above the header's maxval 9"),
])
def test_bad_pnm_bytes(data: bytes, message: str) -> None:
    with pytest.raises(ImageError, match=f"^mem: {message}"):
        pictures.parse_pnm(data, "mem")


def test_plain_pixels_may_carry_comments_and_binary_ones_two_bytes() -> None:
    image = pictures.parse_pnm(b"P2 2 2 300 # maxval\n1 2 # first row\n3\n# a line of its own\n300\n")
    assert pictures.rows(image) == [[1.0, 2.0], [3.0, 300.0]] and image.kind == "P2, 16-bit gray"
    image = pictures.parse_pnm(b"P6 1 1 4095\n\x0f\xff\x00\x01\x01\x00")
    assert [pictures.rows(image, c) for c in range(3)] == [[[4095.0]], [[1.0]], [[256.0]]]
    assert image.kind == "P6, 16-bit colour" and image.peak == 4095.0


def test_random_bytes_never_crash(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    good = b"P5\n4 3\n255\n" + bytes(range(12))
    for i in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randint(0, len(data))] if i % 3 == 0 else data
        try:
            pictures.parse_pnm(bytes(data), "fuzz")
        except ImageError as exc:
            assert str(exc).startswith("fuzz: ")


# ---------------------------------------------------------------------------------------
# Comparison figures (pure)


def test_psnr_and_max_difference() -> None:
    expected = from_rows([[100.0] * 10 for _ in range(10)], peak=255, source="ref.pgm")
    rows = [[100.0] * 10 for _ in range(10)]
    rows[3][4] = 110.0
    got = from_rows(rows, peak=255, source="out.pgm")
    result = compare_images(got, expected)
    # one pixel off by 10 among 100: MSE = 1, PSNR = 10 log10(255²)
    assert result.mse == pytest.approx(1.0)
    assert result.psnr == pytest.approx(20 * math.log10(255), abs=1e-4)
    assert result.max_diff == 10.0
    assert result.figures() == "PSNR 48.1 dB, max |difference| 10"
    assert result.passes(min_psnr=48) and not result.passes(min_psnr=49)
    assert result.passes(max_diff=10) and not result.passes(max_diff=9.5)
    assert not result.passes()  # no bounds: identical only
    row = result.check("blurred image", min_psnr=40, max_diff=2)
    assert (row.name, row.status, row.expected) == ("blurred image", "fail", "PSNR ≥ 40 dB, max |difference| ≤ 2")
    assert row.reason == ("out.pgm differs from the solution's picture: a pixel differs by 10 "
                          "(at most 2 allowed)")
    assert result.check(min_psnr=40).status == "pass"


def test_sizes_and_nan_are_problems_not_figures() -> None:
    a = from_rows([[0.0, 1.0]], peak=1, source="a")
    b = from_rows([[0.0], [1.0]], peak=1, source="b")
    result = compare_images(a, b)
    assert result.problem == "the sizes differ: got 2×1 gray, expected 1×2 gray"
    assert not result.passes(min_psnr=0) and result.check().reason == result.problem
    nan = from_rows([[0.0, float("nan")]], source="nan.raw")
    assert compare_images(nan, a).problem == "nan.raw has NaN or infinite values"
    assert "has NaN" in repr(nan)
    c = from_rows([[0.0, 1.0]], peak=255, source="c")
    assert "maxvals differ" in compare_images(a, c).problem


def test_raw_peak_is_the_expected_range() -> None:
    expected = from_rows([[-1.0, 1.0]], source="e")
    got = from_rows([[-1.0, 1.2]], source="g")
    result = compare_images(got, expected)
    assert result.peak == 2.0 and result.max_diff == pytest.approx(0.2)
    assert result.psnr == pytest.approx(10 * math.log10(4 / (0.04 / 2)), abs=1e-3)


# ---------------------------------------------------------------------------------------
# The image check kind: two files -> one row of the verdict table


def test_image_check_files(writer: Path, tmp_path: Path) -> None:
    ref = written(writer, "p5", tmp_path, "solution.pgm")
    same = written(writer, "p2", tmp_path, "blur.pgm")
    assert image_check(same, ref, "blur", min_psnr=40).status == "pass"
    missing = image_check(tmp_path / "none.pgm", ref, min_psnr=40)
    assert (missing.status, missing.got, missing.reason) == ("fail", "no file", "the program wrote no none.pgm")
    broken = image_check(written(writer, "truncated", tmp_path), ref, max_diff=1)
    assert broken.status == "fail" and "truncated" in broken.reason
    no_ref = image_check(same, tmp_path / "nothing.pgm", min_psnr=40)
    assert no_ref.status == "incomplete" and "solution wrote no nothing.pgm" in no_ref.reason
    raw = written(writer, "float32", tmp_path)
    assert image_check(raw, raw, raw=(W, H, "float32")).status == "pass"
    other = image_check(written(writer, "p6", tmp_path), ref, min_psnr=1)
    assert other.status == "fail" and "sizes differ" in other.reason


# ---------------------------------------------------------------------------------------
# Showing


def _decode(html_text: str) -> list[PILImage.Image]:
    return [PILImage.open(io.BytesIO(base64.b64decode(m)))
            for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html_text)]


def test_show_a_strip_by_pattern(writer: Path, tmp_path: Path) -> None:
    for i in (2, 0, 1):
        written(writer, "p5", tmp_path, f"life_{i}.pgm")
    shown = show(str(tmp_path / "life_*.pgm"))
    assert [Path(i.source).name for i in shown.images] == ["life_0.pgm", "life_1.pgm", "life_2.pgm"]
    frames = _decode(shown._repr_html_())
    # 40×24 is enlarged by a whole factor (5) so that each pixel is a visible square
    assert [f.size for f in frames] == [(200, 120)] * 3
    assert frames[0].getpixel((5 * 7, 5 * 2)) == gray8(7, 2)
    assert "life_1.pgm (40×24, black 0, white 255)" in shown._repr_html_()
    png = PILImage.open(io.BytesIO(shown._repr_png_()))
    assert png.width > 3 * 200
    assert "life_0.pgm:" in repr(shown) and "40×24 gray" in repr(shown)
    with pytest.raises(ImageError, match="no file matches"):
        show(str(tmp_path / "nothing_*.pgm"))
    with pytest.raises(ImageError, match="2 labels for 3 pictures"):
        show(str(tmp_path / "life_*.pgm"), labels=["a", "b"])


def test_show_large_picture_is_shrunk_and_raw_is_stretched(tmp_path: Path) -> None:
    photo = pictures.read_pnm(ROOT / "examples" / "data" / "camera.pgm")
    assert (photo.width, photo.height, photo.peak) == (512, 512, 255.0)
    wide = from_rows([[float(x % 7) for x in range(1024)] for _ in range(8)], source="wide")
    (frame,) = _decode(show(wide)._repr_html_())
    assert frame.size == (512, 4)
    raw = from_rows([[-2.0, 2.0]], source="w.raw")
    (frame,) = _decode(show(raw)._repr_html_())
    assert frame.getpixel((0, 0)) == 0 and frame.getpixel((frame.width - 1, 0)) == 255


def test_comparison_shows_three_frames(tmp_path: Path) -> None:
    expected = from_rows([[10.0 * x for x in range(8)] for _ in range(8)], peak=255, source="ref.pgm")
    rows = pictures.rows(expected)
    rows[2][2] += 4
    result = compare_images(from_rows(rows, peak=255, source="out.pgm"), expected)
    text = result._repr_html_()
    frames = _decode(text)
    assert len(frames) == 3
    assert "|difference|: black 0, white 4" in text and "PSNR" in text
    factor = frames[2].width // 8
    assert frames[2].getpixel((2 * factor, 2 * factor)) == 255 and frames[2].getpixel((0, 0)) == 0
    assert str(result).startswith("got out.pgm (8×8 gray) vs expected ref.pgm (8×8 gray): PSNR")
    mismatch = compare_images(from_rows([[1.0]], peak=255, source="x"), expected)
    assert len(_decode(mismatch._repr_html_())) == 2 and "sizes differ" in mismatch._repr_html_()
    PILImage.open(io.BytesIO(result._repr_png_())).verify()


def test_shown_in_a_real_browser(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    white = from_rows([[255.0] * 16 for _ in range(16)], peak=255, source="white.pgm")
    black = from_rows([[0.0] * 16 for _ in range(16)], peak=255, source="black.pgm")
    page = tmp_path / "page.html"
    page.write_text("<html><body style='margin:0;background:rgb(0,0,255)'>"
                    + show(white, black)._repr_html_() + "</body></html>")
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=600,300", page.as_uri()],
                   capture_output=True, timeout=120)
    picture = PILImage.open(shot).convert("RGB")
    # the two 192-pixel squares, side by side on the blue page
    assert picture.getpixel((96, 96)) == (255, 255, 255)
    assert picture.getpixel((192 + 8 + 96, 96)) == (0, 0, 0)
    assert picture.getpixel((500, 96)) == (0, 0, 255)


@pytest.mark.slow
def test_in_a_notebook_after_get(kernel: Kernel) -> None:
    cell = kernel.run(r"""%%idrrun --get ramp.pgm
#include <stdio.h>
int main(void)
{
    FILE *f = fopen("ramp.pgm", "wb");
    fprintf(f, "P5\n64 8\n255\n");
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 64; x++)
            fputc(4 * x, f);
    fclose(f);
    printf("written\n");
    return 0;
}
""")
    assert cell.status == "ok", cell.error_text + cell.stdout
    shown = kernel.run("from idrrun.images import show\nshow('ramp.pgm')")
    assert shown.status == "ok", shown.error_text
    (data,) = shown.displays
    assert {"text/html", "image/png", "text/plain"} <= set(data)
    assert "ramp.pgm (64×8, black 0, white 255)" in data["text/html"]
    frame = PILImage.open(io.BytesIO(base64.b64decode(data["image/png"])))
    assert frame.width > 64 * 3
    bad = kernel.run("show('nothing.pgm')")
    assert bad.status == "error" and "ImageError" in bad.error_text and "no such file" in bad.error_text


def test_a_compressed_reference_is_read_and_a_broken_one_said(tmp_path: Path) -> None:
    """A course keeps a large reference picture as NAME.gz: read as the picture it holds; a
    corrupt or truncated one makes the check incomplete with why, never an exception."""
    import gzip

    picture = b"P5\n3 2\n255\n" + bytes([0, 50, 100, 150, 200, 250])
    (tmp_path / "got.pgm").write_bytes(picture)
    (tmp_path / "ref.pgm.gz").write_bytes(gzip.compress(picture, mtime=0))
    result = image_check(tmp_path / "got.pgm", tmp_path / "ref.pgm.gz", "picture")
    assert result.status == "pass" and result.got.startswith("identical"), result
    assert pictures.read_pnm(tmp_path / "ref.pgm.gz").source.endswith("ref.pgm")
    for broken in (b"not gzip at all", gzip.compress(picture)[:12]):
        (tmp_path / "bad.pgm.gz").write_bytes(broken)
        result = image_check(tmp_path / "got.pgm", tmp_path / "bad.pgm.gz", "picture")
        assert result.status == "incomplete" and "cannot be read" in result.reason, result
