"""A class's submissions compared with each other and with the published solution, the start
file's code removed first: the pairs that share most of their own code, with the passages they
share. For the instructor's eyes only: nothing here reaches a student's feedback.

    compare(documents, starts, threshold) -> Similarity

The library is copydetect (PyPI, MIT licence, 0.5.0 of March 2024): MOSS's winnowing
fingerprints (Schleimer, Wilkerson and Aiken 2003) over code tokenised by Pygments, whose C,
C++, CUDA and Fortran lexers it uses, every name made one letter (renaming variables changes
nothing, comments are dropped), and the removal of a given skeleton's fingerprints
("boilerplate": here the start file). It is an optional extra, `pip install idrrun[similarity]`:
it brings numpy and matplotlib (for its HTML report, which idrrun does not use), too heavy for
every student's install. Dolos (tree-sitter) would parse more precisely but runs on Node, not
in Python; tree-sitter's Python grammars come without a fingerprinting library, which would then
be ours to write and keep.

What idrrun adds, each where the code does it:
- a student's code is what the compiler reads: in a folder handed in, the files the source
  includes from it (build.local_includes, as discovery read them) follow the source in one
  document (joined), and a passage names the file of its lines. A copy hidden in `impl.h` behind
  a source of one `#include` is found as a copy, not "no code of their own".
- the directives are made code before the text is tokenised: Pygments reads `#pragma acc ...`
  as one preprocessor token (copydetect keeps one letter of it) and `!$acc ...` as a comment
  (dropped), and in an OpenACC course the directives are most of what a student writes.
  Measured on loops_matvec (tests/data/similarity): an honest near miss shared 87 % of its own
  code with the solution without this, 55 % with it; copies stay at 100 %.
- every k-gram is kept (a winnowing window of 1, which copydetect's documentation allows "if
  computation time is not an issue"): copydetect hashes with Python's hash(), salted per
  process, so a window would pick other fingerprints at every run and the same class would get
  other figures each time.
- the shares computed as copydetect's compare_files computes them, with numpy (_shares says
  why; a test holds the two equal); the pairs above a threshold; and the passages that match,
  aligned side by side with their lines, where copydetect gives each file's stretches apart.
"""

from __future__ import annotations

import bisect
import importlib
import io
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import escape
from ..errors import UsageError
from ..model import Language
from ..checks.words import plural

try:  # the optional extra idrrun[similarity]; library() says how to install it
    copydetect: Any = importlib.import_module("copydetect")
    numpy: Any = importlib.import_module("numpy")
except ImportError:
    copydetect = numpy = None

INSTALL_HINT = "comparing submissions needs copydetect: pip install 'idrrun[similarity]'"

# The shortest stretch of tokenised code that counts as shared, in characters (copydetect's
# noise threshold and default): a name is one letter there, so 25 is about one line of code.
K = 25
# A pair is listed when the larger of its two shares reaches the threshold...
THRESHOLD = 0.7
# ...and they share at least this much tokenised code: two files that each add one identical
# line to the start file share 100 % of very little.
MIN_SHARED = 3 * K
# A passage shown in the report is cut after this many lines.
MAX_PASSAGE_LINES = 40
# Shared stretches at most this many lines apart on both sides make one passage.
GAP = 3

# Pygments' lexer of each language.
_LEXERS: dict[Language, str] = {"c": "c", "c++": "cpp", "cuda": "cuda", "fortran": "fortran"}
# A directive's sentinel, replaced by as many spaces (lines and columns stay where they were):
# `#pragma` in C, C++ and CUDA; `!$` opening a Fortran line (free form, or fixed form's
# `c$acc`, `*$acc` in the first column), which covers !$acc, !$omp and conditional lines.
_C_SENTINEL = re.compile(r"^([ \t]*)(#[ \t]*pragma)\b", re.MULTILINE)
_FORTRAN_SENTINEL = re.compile(r"^([ \t]*!\$|[cC*!]\$)", re.MULTILINE)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class Document:
    """One text compared: a student's submission, or the published solution."""

    name: str  # the student, as the grading report names them; the solution's file
    language: Language
    text: str
    published: bool = False  # the published solution
    first_line: int = 1  # the line number of the text's first line (2 in a notebook's cell)
    # When the text is made of several files (a folder's source, then the headers it includes,
    # each from a line of its own): each file's name and the index of its first line in the
    # text, the first file at 0. Empty: one file, named by `name`.
    files: tuple[tuple[str, int], ...] = ()

    @property
    def label(self) -> str:
        return f"the published solution ({self.name})" if self.published else self.name

    def where(self, index: int) -> tuple[str, int]:
        """The file ("" when there is one) and its line number of the text's line `index`."""
        if not self.files:
            return "", index + self.first_line
        k = bisect.bisect_right([start for _, start in self.files], index) - 1
        name, start = self.files[k]
        return name, index - start + (self.first_line if k == 0 else 1)


def joined(name: str, language: Language, parts: Sequence[tuple[str, str]],
           first_line: int = 1) -> Document:
    """One student's code made of several files (the source first, then its headers): one
    document, each file from a line of its own, its lines numbered as in its file."""
    if len(parts) == 1:
        return Document(name, language, parts[0][1], first_line=first_line)
    texts, files, at = [], [], 0
    for file, text in parts:
        text = text if text.endswith("\n") else text + "\n"
        files.append((file, at))
        texts.append(text)
        at += len(text.splitlines())
    return Document(name, language, "".join(texts), first_line=first_line, files=tuple(files))


@dataclass(frozen=True)
class Passage:
    first: int  # line numbers, inclusive, as the file (or the notebook's cell) numbers them
    last: int
    text: str  # those lines, cut after MAX_PASSAGE_LINES; a "[file]" line where a file starts
    # The files of `first` and `last`, when the document is made of several ("" otherwise).
    file: str = ""
    last_file: str = ""

    @property
    def where(self) -> str:
        """"lines 3-40", "impl.h, lines 1-40" or "x.c line 3 to impl.h line 40"."""
        if self.file != self.last_file:
            return f"{self.file} line {self.first} to {self.last_file} line {self.last}"
        return (f"{self.file}, " if self.file else "") + f"lines {self.first}-{self.last}"


@dataclass(frozen=True)
class Pair:
    first: Document
    second: Document
    # The share of each one's own code (its tokens, the start file's removed) found in the other.
    shares: tuple[float, float]
    shared: int  # characters of tokenised code in common
    passages: tuple[tuple[Passage, Passage], ...]

    @property
    def score(self) -> float:
        return max(self.shares)


@dataclass(frozen=True)
class Similarity:
    threshold: float
    pairs: tuple[Pair, ...]  # at or above the threshold, the highest first
    compared: tuple[Document, ...]
    # Submissions with no code of their own once the start file is removed (it was handed in
    # as it was given): nothing to compare.
    unchanged: tuple[str, ...] = ()
    library: str = ""  # "copydetect 0.5.0"


def library() -> Any:
    """copydetect, or a UsageError that says how to install it."""
    if copydetect is None:
        raise UsageError(INSTALL_HINT)
    return copydetect


def normalised(text: str, language: Language) -> str:
    """The text as it is tokenised: directives made code, Fortran in lower case (the language
    ignores case). Every character stays where it was, so that offsets and lines hold."""
    if language == "fortran":
        text = _FORTRAN_SENTINEL.sub(lambda m: " " * len(m.group(0)), text.translate(_ASCII_LOWER))
        return text
    return _C_SENTINEL.sub(lambda m: m.group(1) + " " * len(m.group(2)), text)


@dataclass(frozen=True)
class _Print:
    """A document's fingerprint as arrays: the place of each k-gram it keeps (in its tokenised
    code, the start file's removed), its hash, and the same hashes sorted."""

    document: Document
    places: Any  # numpy int64, ascending
    hashes: Any  # the hash of the k-gram at each place
    by_hash: Any  # indices into places that sort the hashes (stable)
    coverage: float  # copydetect's token coverage: the tokenised characters its k-grams cover
    offsets: Any  # copydetect's filtering offsets (tokenised -> text)
    lines: tuple[str, ...]
    line_starts: tuple[int, ...]

    @property
    def sorted_hashes(self) -> Any:
        return self.hashes[self.by_hash]


def _fingerprint(doc: Document, boilerplate: Any) -> Any:
    return library().CodeFingerprint(doc.name, K, 1, boilerplate=boilerplate, filter=True,
                                     language=_LEXERS[doc.language],
                                     fp=io.StringIO(normalised(doc.text, doc.language)))


def _boilerplate(start: str | None, language: Language) -> Any:
    """The start file's fingerprints (every k-gram, as copydetect takes a skeleton's)."""
    if start is None:
        return None
    skeleton = _fingerprint(Document("start file", language, start), None)
    return numpy.array(sorted(skeleton.hashes), dtype=numpy.int64)


def _print(doc: Document, boilerplate: Any) -> _Print:
    fp = _fingerprint(doc, boilerplate)
    pairs = sorted((place, h) for h, places in fp.hash_idx.items() for place in places)
    places = numpy.array([place for place, _ in pairs], dtype=numpy.int64)
    hashes = numpy.array([h for _, h in pairs], dtype=numpy.int64)
    lines = doc.text.splitlines(True)
    return _Print(doc, places, hashes, numpy.argsort(hashes, kind="stable"),
                  float(fp.token_coverage), fp.offsets, tuple(line.rstrip("\r\n") for line in lines),
                  tuple(itertools.accumulate((len(line) for line in lines), initial=0)))


def _shares(a: _Print, b: _Print) -> tuple[tuple[float, float], int]:
    """What copydetect's compare_files computes, the share of each one's own code found in the
    other and the characters in common (the smaller count of the two sides), from the same
    places and with its own get_copied_slices. compare_files gathers the places hash by hash
    in Python, which over the 5050 pairs of a class of 100 whose honest answers converge took
    most of the time; numpy.isin gathers them at once (tests/test_similarity.py holds the two
    to the same figures)."""
    utils = library().utils
    in_b = a.places[numpy.isin(a.hashes, b.hashes)]
    if len(in_b) == 0:
        return (0.0, 0.0), 0
    in_a = b.places[numpy.isin(b.hashes, a.hashes)]
    overlaps = []
    for places in (in_b, in_a):
        slices = utils.get_copied_slices(places, K)
        overlaps.append(int(numpy.sum(slices[1] - slices[0])))
    return (overlaps[0] / a.coverage, overlaps[1] / b.coverage), min(overlaps)


def _raw(p: _Print, places: Any) -> Any:
    """Places in the tokenised code as offsets in the text (copydetect's own mapping, as its
    compare_files applies it to the stretches it returns)."""
    offsets = p.offsets
    if len(offsets) == 0:
        return places
    at = numpy.clip(numpy.searchsorted(offsets[:, 0], places), 0, offsets.shape[0] - 1)
    return places + offsets[:, 1][at]


def _partners(a: _Print, b: _Print) -> tuple[Any, Any]:
    """Each shared k-gram's place in a with a place of the same k-gram in b: the i-th of its
    places in a with the i-th in b (the last of b's when a has more). Sorted by place in a."""
    ha, hb = a.sorted_hashes, b.sorted_hashes
    shared = numpy.isin(ha, hb)
    ha, pa = ha[shared], a.places[a.by_hash][shared]
    rank = numpy.arange(len(ha)) - numpy.searchsorted(ha, ha, side="left")
    first, end = numpy.searchsorted(hb, ha, side="left"), numpy.searchsorted(hb, ha, side="right")
    pb = b.places[b.by_hash][numpy.minimum(first + rank, end - 1)]
    order = numpy.argsort(pa, kind="stable")
    return pa[order], pb[order]


def _runs(a: _Print, b: _Print) -> list[tuple[int, int, int, int]]:
    """The stretches both share, aligned: (start, end) in a's text, then in b's. A run goes on
    while the next shared k-gram follows the last within a k-gram, by as much on both sides
    (give or take a k-gram), as a copy does."""
    pa, pb = _partners(a, b)
    if len(pa) == 0:
        return []
    step_a, step_b = numpy.diff(pa), numpy.diff(pb)
    breaks = numpy.flatnonzero((step_a >= K) | (numpy.abs(step_b - step_a) >= K)) + 1
    starts = numpy.concatenate(([0], breaks))
    a_from, a_to = _raw(a, pa[starts]), _raw(a, numpy.maximum.reduceat(pa, starts) + K - 1) + 1
    b_from = _raw(b, numpy.minimum.reduceat(pb, starts))
    b_to = _raw(b, numpy.maximum.reduceat(pb, starts) + K - 1) + 1
    return [(int(w), int(x), int(y), int(z)) for w, x, y, z in zip(a_from, a_to, b_from, b_to)]


def _lines(p: _Print, start: int, end: int) -> tuple[int, int]:
    """The lines (0-based, inclusive) of the text's stretch [start, end)."""
    first = bisect.bisect_right(p.line_starts, start) - 1
    last = bisect.bisect_left(p.line_starts, end) - 1
    return first, max(first, last)


def _passage(p: _Print, first: int, last: int) -> Passage:
    doc = p.document
    starts = {start: name for name, start in doc.files}
    shown: list[str] = []
    for index in range(first, last + 1):
        if len(shown) >= MAX_PASSAGE_LINES:
            shown.append(f"[... {last + 1 - index} more lines]")
            break
        if index in starts and index != first:
            shown.append(f"[{starts[index]}]")
        shown.append(p.lines[index] if index < len(p.lines) else "")
    (file, line), (last_file, last_line) = doc.where(first), doc.where(last)
    return Passage(line, last_line, "\n".join(shown), file, last_file)


def _passages(a: _Print, b: _Print) -> tuple[tuple[Passage, Passage], ...]:
    """The shared stretches as passages of whole lines, side by side. Stretches a few lines
    apart on both sides are one passage: what parts them is the start file's code, which both
    have, and a copied block reads better whole."""
    spans: list[list[int]] = []  # first a, last a, first b, last b
    for a_from, a_to, b_from, b_to in _runs(a, b):
        (fa, la), (fb, lb) = _lines(a, a_from, a_to), _lines(b, b_from, b_to)
        if spans and fa <= spans[-1][1] + GAP and spans[-1][2] <= fb <= spans[-1][3] + GAP:
            spans[-1][1], spans[-1][3] = max(spans[-1][1], la), max(spans[-1][3], lb)
        else:
            spans.append([fa, la, fb, lb])
    return tuple((_passage(a, fa, la), _passage(b, fb, lb)) for fa, la, fb, lb in spans)


def _pair(a: _Print, b: _Print, threshold: float) -> Pair | None:
    shares, shared = _shares(a, b)
    if shared < MIN_SHARED or max(shares) < threshold:
        return None
    return Pair(a.document, b.document, shares, shared, _passages(a, b))


def _version() -> str:
    version = getattr(library(), "__version__", "")
    return f"copydetect {version}".strip()


def compare(documents: Iterable[Document], starts: Mapping[str, str],
            threshold: float = THRESHOLD) -> Similarity:
    """Every pair of documents of one language (C is never compared with Fortran), the start
    file of that language removed from each first; the pairs whose larger share reaches
    `threshold`, highest first."""
    library()
    docs = tuple(documents)
    pairs: list[Pair] = []
    unchanged: list[str] = []
    for language in dict.fromkeys(d.language for d in docs):
        boilerplate = _boilerplate(starts.get(language), language)
        prints = [_print(d, boilerplate) for d in docs if d.language == language]
        unchanged += [p.document.name for p in prints if not p.document.published and not p.coverage]
        for a, b in itertools.combinations(prints, 2):
            found = _pair(a, b, threshold)
            if found is not None:
                pairs.append(found)
    pairs.sort(key=lambda p: (-p.score, -p.shared, p.first.name, p.second.name))
    return Similarity(threshold, tuple(pairs), docs, tuple(unchanged), _version())


# ---------------------------------------------------------------------------------------------
# The instructor's report


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"


def _cell(text: str) -> str:
    """A name or a place, as the report writes it: Markdown that shows it as it is (and no
    formula where a table is pasted into a spreadsheet)."""
    return escape.markdown_cell(text)


def _language_tag(language: Language) -> str:
    return {"c++": "cpp"}.get(language, language)


def render_markdown(result: Similarity, exercise: str) -> str:
    """The instructor's report: the pairs, then each pair's passages side by side."""
    docs = result.compared
    students = sum(not d.published for d in docs)
    published = " and the published solution" if any(d.published for d in docs) else ""
    lines = [f"# Similarity: {exercise}", "",
             f"{plural(students, 'submission')}{published} compared with each other, the start file's "
             f"code removed first ({result.library}; names do not count, comments neither). "
             f"Pairs where one shares at least {_percent(result.threshold)} of its own code "
             "with the other: a reason to look, not a verdict.", ""]
    if result.unchanged:
        lines += ["No code of their own beyond the start file: "
                  + ", ".join(_cell(n) for n in result.unchanged), ""]
    if not result.pairs:
        return "\n".join(lines + ["No pair above the threshold."]) + "\n"
    lines += ["| first | second | share of the first's own code | of the second's | shared |",
              "|---|---|---|---|---|"]
    for p in result.pairs:
        lines.append(f"| {_cell(p.first.label)} | {_cell(p.second.label)} | "
                     f"{_percent(p.shares[0])} | {_percent(p.shares[1])} | {p.shared} |")
    for p in result.pairs:
        lines += ["", f"## {_cell(p.first.label)} and {_cell(p.second.label)}: "
                      f"{_percent(p.shares[0])} and {_percent(p.shares[1])}"]
        for one, other in p.passages:
            for doc, passage in ((p.first, one), (p.second, other)):
                lines += ["", f"{_cell(doc.label)}, {_cell(passage.where)}:", "",
                          escape.fenced(passage.text, _language_tag(doc.language))]
    return "\n".join(lines) + "\n"


def _side(passage: Passage) -> dict[str, object]:
    files = {"files": [passage.file, passage.last_file]} if passage.file else {}
    return {"lines": [passage.first, passage.last], "text": passage.text, **files}


def as_json(result: Similarity, exercise: str) -> dict[str, object]:
    return {
        "exercise": exercise, "threshold": result.threshold, "library": result.library,
        "compared": [{"name": d.name, "language": d.language, "published": d.published}
                     for d in result.compared],
        "unchanged": list(result.unchanged),
        "pairs": [{"first": p.first.name, "first_published": p.first.published,
                   "second": p.second.name, "second_published": p.second.published,
                   "shares": [round(s, 4) for s in p.shares], "shared": p.shared,
                   "passages": [{"first": _side(a), "second": _side(b)}
                                for a, b in p.passages]}
                  for p in result.pairs],
    }
