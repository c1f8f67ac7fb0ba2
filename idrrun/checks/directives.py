"""The code a compiler reads, and the OpenACC directives in it: what `uses_openacc` and `source`
checks look at, so that directives written in comments or in an `#if 0` block count for nothing.

For C and C++ the build's own preprocessor output is best (build.PREPROCESSED, made by the
family with the build's flags: every #if decided as the compiler decided it). Without it (another
family, Fortran) `code_text` removes comments, and C blocks under a literal `#if 0`, itself.

Everything here runs in time linear in the text (one pass, no backtracking regular expression
over the whole text) and never raises: a submission's source may be anything.
"""

from __future__ import annotations

import re
from pathlib import Path

# Directive lines, matched one line at a time (linear).
_C_PRAGMA = re.compile(r'^[ \t]*#[ \t]*pragma[ \t]+acc\b|_Pragma[ \t]*\([ \t]*"[ \t]*acc\b')
# Free form: `!$acc` after blanks. Fixed form: `c$acc`, `*$acc` or `!$acc` in column 1. The
# sentinel must end there: `!$accx` is a comment, `!$acc&` a continued directive.
_F_SENTINEL = re.compile(r"^(?:[ \t]*!|[cC*])\$acc(?![A-Za-z0-9_$])", re.IGNORECASE)
_F_ANY_SENTINEL = re.compile(r"^[ \t]*!\$", re.IGNORECASE)
_C_IF = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")

C_LIKE = ("c", "c++", "cuda")


def strip_c_comments(text: str) -> str:
    """C/C++ text without its comments (a comment becomes a space; newlines are kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    start = 0
    while i < n:
        ch = text[i]
        if ch == '"' or ch == "'":
            # A string or character literal, with its escapes; it ends at its quote or the line.
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = min(j + 1, n)
        elif ch == "/" and i + 1 < n and text[i + 1] == "/":
            out.append(text[start:i])
            j = text.find("\n", i)
            i = start = n if j < 0 else j
        elif ch == "/" and i + 1 < n and text[i + 1] == "*":
            out.append(text[start:i])
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, end))
            i = start = end
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)


def drop_disabled_blocks(text: str) -> str:
    """Lines under `#if 0` (and the `#else` of an `#if 1`) removed; other conditions kept, as
    only the preprocessor can decide them."""
    out: list[str] = []
    # One entry per open #if: [this branch is live, a branch was taken, the condition is unknown]
    stack: list[list[bool]] = []
    for line in text.split("\n"):
        m = _C_IF.match(line)
        live = all(entry[0] for entry in stack)
        if m is None:
            out.append(line if live else "")
            continue
        word, rest = m.group(1), m.group(2)
        literal = rest.split("//")[0].split("/*")[0].strip()
        if word in ("if", "ifdef", "ifndef"):
            value = {"0": False, "1": True}.get(literal) if word == "if" else None
            stack.append([value is not False, value is True, value is None])
        elif word in ("elif", "else") and stack:
            entry = stack[-1]
            if entry[2]:
                entry[0] = True  # undecidable: every branch is kept
            elif word == "else" or literal in ("0", "1"):
                take = not entry[1] and (word == "else" or literal == "1")
                entry[0], entry[1] = take, entry[1] or take
            else:
                entry[0], entry[2] = not entry[1], True
        elif word == "endif" and stack:
            stack.pop()
        out.append(line)
    return "\n".join(out)


def strip_fortran_comments(text: str) -> str:
    """Free-form Fortran without its comments; directive lines (`!$acc`, `!$omp`, `!$`
    conditional compilation) are kept whole."""
    out = []
    for line in text.split("\n"):
        if _F_ANY_SENTINEL.match(line):
            out.append(line)
            continue
        quote = ""
        cut = len(line)
        for k, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch == "!":
                cut = k
                break
        out.append(line[:cut])
    return "\n".join(out)


def code_text(text: str, language: str) -> str:
    """The source without what the compiler ignores (comments; C's `#if 0` blocks)."""
    try:
        lang = language.strip().lower()
        if lang in C_LIKE:
            return drop_disabled_blocks(strip_c_comments(text))
        if lang == "fortran":
            return strip_fortran_comments(text)
        return text
    except Exception:  # noqa: BLE001 - a check helper never breaks a run
        return ""


def has_directives(code: str, language: str) -> bool:
    """Whether code (already code_text, or preprocessed) holds an OpenACC directive."""
    lang = language.strip().lower()
    pattern = _F_SENTINEL if lang == "fortran" else _C_PRAGMA
    both = lang not in (*C_LIKE, "fortran")
    return any(pattern.search(line) or (both and _F_SENTINEL.search(line))
               for line in code.split("\n"))


# What can put work on a GPU besides an OpenACC directive: OpenMP's target constructs and
# device routines, the OpenACC, CUDA and NVIDIA libraries' calls, their headers and modules.
_OMP_TARGET = re.compile(r"^[ \t]*(?:#[ \t]*pragma[ \t]+omp\b|!\$omp\b).*\btarget\b|"
                         r"_Pragma[ \t]*\([ \t]*\"[ \t]*omp\b[^\"]*\btarget\b", re.IGNORECASE)
_NAMES = (r"\b(?:acc_\w+|omp_target\w*|omp_(?:get|set)_\w*device\w*|omp_is_initial_device"
          r"|GOACC_\w+|GOMP_\w+"
          r"|cuda\w*|cublas\w*|cufft\w*|cusparse\w*|cusolver\w*|nvtx\w*"
          r"|openacc|cudafor|mpi|MPI_\w+|mpi_f08"
          # ...and what reaches the driver without naming it: a library loaded by name, another
          # program started, the kernel called directly, its environment rewritten (the GPUs it
          # was not given would be found again), C called from Fortran.
          r"|dlopen|dlsym|dlvsym|dlmopen|exec[lv]\w*|fexecve|posix_spawn\w*|system|popen"
          r"|execute_command_line|syscall|ioctl|asm|__asm__|setenv|unsetenv|putenv|environ"
          r"|bind\s*\(\s*c)\b")
# C's names are case-sensitive: the CUDA driver's (cuInit, cuMemAlloc) are told by their case;
# Fortran's are not, and reach the driver only through bind(C), which the names above hold.
_GPU_NAMES = {"c": re.compile(_NAMES + r"|\bcu[A-Z]\w*"), "fortran": re.compile(_NAMES, re.IGNORECASE)}
# String literals, whose words are data (getenv("CUDA_VISIBLE_DEVICES")), not names.
_STRINGS = {"c": re.compile(r'"(?:\\.|[^"\\\n])*"'),
            "fortran": re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")}


_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"|^[ \t]*include[ \t]*[\'"]([^\'"]+)',
                            re.IGNORECASE | re.MULTILINE)


def _directive_lines(code: str, language: str) -> bool:
    """An OpenACC directive or an OpenMP target construct in code (code_text, or preprocessed)."""
    return has_directives(code, language) or any(_OMP_TARGET.search(line) for line in code.split("\n"))


def reaches_gpu(text: str, language: str, headers: tuple[tuple[str, str], ...] = (),
                compiled: str | None = None) -> bool:
    """Whether a program built from this source (and its own headers) may use a GPU: an
    OpenACC directive, an OpenMP target construct, a name of the OpenACC or OpenMP device
    API, CUDA or an NVIDIA library in its code, or what reaches the driver without naming it.
    `compiled`: the source as the compiler read it (build.PREPROCESSED), where the build kept
    it: a directive a macro makes (`_Pragma(#x)`) is there. False only where none is there, in
    a language read here: a start file, its directives in comments. Conservative: any doubt
    is True."""
    lang = language.strip().lower()
    if lang not in (*C_LIKE, "fortran"):
        return True
    if compiled is not None and _directive_lines(compiled, language):
        return True
    known = {Path(name).name for name, _ in headers}
    for body in (text, *(h for _, h in headers)):
        # A file of its own it includes and that was not read with it: it could hold anything.
        if any(Path(a or b).name not in known for a, b in _LOCAL_INCLUDE.findall(body)):
            return True
        code = code_text(body, language)
        if not code.strip() and body.strip():
            return True  # nothing read but comments, or code_text failed (it never raises)
        kind = "fortran" if lang == "fortran" else "c"
        if _directive_lines(code, language) or _GPU_NAMES[kind].search(_STRINGS[kind].sub('""', code)):
            return True
    return False
