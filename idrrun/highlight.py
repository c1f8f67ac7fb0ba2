"""Highlighting `%%idrrun` cells outside the kernel: a Pygments lexer for exported notebooks,
and the Jupyter server hook that points nbconvert's magic-cell highlighting at it.

nbconvert highlights a cell in another language when its HighlightMagicsPreprocessor maps the
cell's magic to a Pygments lexer (`HighlightMagicsPreprocessor.languages`). One name cannot say
C or Fortran, so the lexer named `idrrun` (a `pygments.lexers` entry point) reads the cell and
hands its body to Pygments' C, C++, CUDA or Fortran lexer. The JupyterLab extension
(labextension/src/language.ts) makes the same choice in the editor.

OpenACC and OpenMP directives are directives in both languages: Pygments' C lexer makes
`#pragma acc` a preprocessor line (Comment.Preproc), its Fortran lexer makes `!$acc` a comment;
here a Fortran line whose first word is an `!$acc` or `!$omp` sentinel gets Comment.Preproc
too, as the editor marks it (the class `cm-idrrun-directive`).

nbconvert reads no `*.d` config folders, so nothing installed can turn this on for the
`jupyter nbconvert` command by itself: it takes
`--HighlightMagicsPreprocessor.languages=%%idrrun=idrrun` (or, in jupyter_nbconvert_config.py,
`c.HighlightMagicsPreprocessor.languages = {"%%idrrun": "idrrun"}`). The Jupyter server does read
`jupyter_server_config.d/`: the wheel enables this module as a server extension there, and it
adds the mapping to the server's config, so "Save and Export Notebook As… HTML" in JupyterLab
and Notebook 7 highlights idrrun cells with no setting at all.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Operator, Text

from .errors import UsageError
from .model import Language
from .request.options import glue_word_lists, make_parser
from .request.source import guess_language

# The magic, as nbconvert's preprocessor finds it (`^\s*%%name\s`) and as IPython runs it
# (blank lines and common indentation dropped first).
_MAGIC = re.compile(r"\A(\s*)(%%)(idrrun)(?=\s|\Z)")
# Pygments lexer aliases for idrrun's languages.
_LEXERS: dict[Language, str] = {"c": "c", "c++": "cpp", "cuda": "cuda", "fortran": "fortran"}
# A Fortran comment that is an OpenACC or OpenMP directive (free form; any case; `!$acc&`
# continues one). labextension/src/language.ts has the same pattern.
_FORTRAN_DIRECTIVE = re.compile(r"!\$(acc|omp)\b", re.IGNORECASE)
# What nbconvert's HighlightMagicsPreprocessor.languages needs for idrrun cells.
NBCONVERT_LANGUAGES: dict[str, str] = {"%%idrrun": "idrrun"}


def cell_language(source: str) -> Language | None:
    """The language a `%%idrrun` cell is shown in; None when `source` is not such a cell.

    `-l`/`--language` on the magic line, else the body's guess (idrrun/source.py), else C — what
    idrrun itself builds when no config names a language.
    """
    magic = _MAGIC.match(source)
    if magic is None:
        return None
    line, _, body = source[magic.end():].partition("\n")
    return _given_language(line) or guess_language(body) or "c"


def _given_language(line: str) -> Language | None:
    """The magic line's `-l`/`--language`, read with idrrun's own option parser.

    Options this version does not know are skipped; a line that does not parse (an unclosed
    quote, a bad value) says nothing, and the body decides.
    """
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    # argparse would print the help and stop: the help flag says nothing about the language.
    words = [word for word in words if word not in ("-h", "--help")]
    try:
        known, _ = make_parser("%%idrrun", with_file=False).parse_known_args(glue_word_lists(words))
    except UsageError:
        return None
    language: Language | None = known.language
    return language


class IdrrunLexer(Lexer):  # type: ignore[misc]  # Pygments ships no type information
    """A `%%idrrun` cell: the magic line as IPython shows it, the body in its own language."""

    name = "idrrun"
    aliases = ["idrrun"]
    filenames: list[str] = []

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, Any, str]]:
        magic = _MAGIC.match(text)
        if magic is None:  # used on a bare source: all of it is code
            yield from self._body_lexer(guess_language(text) or "c").get_tokens_unprocessed(text)
            return
        space, percent, name = magic.groups()
        if space:
            yield 0, Text, space
        yield magic.start(2), Operator, percent
        yield magic.start(3), Keyword, name
        line_end = text.find("\n", magic.end())
        body_start = len(text) if line_end < 0 else line_end + 1
        if body_start > magic.end():
            yield magic.end(), Text, text[magic.end():body_start]
        language = cell_language(text) or "c"
        body = text[body_start:]
        for index, token, value in self._body_tokens(language, body):
            yield body_start + index, token, value

    def _body_tokens(self, language: Language, body: str) -> Iterator[tuple[int, Any, str]]:
        tokens = self._body_lexer(language).get_tokens_unprocessed(body)
        if language != "fortran":
            yield from tokens
            return
        for index, token, value in tokens:
            yield index, _fortran_directive(body, index, token, value), value

    def _body_lexer(self, language: Language) -> Any:
        return get_lexer_by_name(_LEXERS[language], **self.options)


def _fortran_directive(body: str, index: int, token: Any, value: str) -> Any:
    """Comment.Preproc for a comment that is a directive: a sentinel first on its line."""
    if token in Comment and _FORTRAN_DIRECTIVE.match(value):
        line_start = body.rfind("\n", 0, index) + 1
        if not body[line_start:index].strip():
            return Comment.Preproc
    return token


# --- the Jupyter server extension ------------------------------------------------------------


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "idrrun.highlight"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add `%%idrrun` to the magics nbconvert highlights, keeping what the user configured.

    The server hands this very config object to nbconvert for each export, so changing it in
    place (not through `update_config`, which replaces it) reaches the exporters.
    """
    section = serverapp.config.HighlightMagicsPreprocessor
    languages = {**NBCONVERT_LANGUAGES, **section.get("languages", {})}
    section.languages = languages
    serverapp.log.info("idrrun: nbconvert highlights %s cells", ", ".join(NBCONVERT_LANGUAGES))
