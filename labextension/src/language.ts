/**
 * Which language a `%%idrrun` cell holds, and which of its lines are directives, from its text
 * alone.
 *
 * This mirrors idrrun/highlight.py `cell_language` (the magic line's `-l`/`--language`, else
 * idrrun/source.py `guess_language` on the body, else C) and its directives (Comment.Preproc) so
 * that a cell looks the same in the editor and in an exported notebook. Keep the two in step;
 * tests/test_highlight.py and tests/test_labextension.py check both sides on the same cells.
 */

export type IdrrunLanguage = 'c' | 'c++' | 'fortran' | 'cuda';

const LANGUAGES: ReadonlySet<string> = new Set(['c', 'c++', 'fortran', 'cuda']);

// IPython drops blank lines and common indentation before it looks for `%%`, and nbconvert's
// HighlightMagicsPreprocessor matches `^\s*%%name\s`: leading white space is allowed here too.
const MAGIC = /^\s*%%idrrun(?=\s|$)/;

// Options whose value is several words and may start with "-" (idrrun/options.py
// _WORD_LIST_OPTIONS): their value is never read as a flag.
const WORD_LIST_OPTIONS: ReadonlySet<string> = new Set([
  '--options',
  '--option',
  '--cliopts',
  '--accopts'
]);

// idrrun/source.py, same order: CUDA, then C++, then C, then Fortran.
const CUDA = /__global__|<<</;
const CXX =
  /#\s*include\s*<(iostream|vector|string|algorithm|cmath|cstdio|cstdlib)>|\bstd::|\busing\s+namespace\b|\btemplate\s*</;
const C = /^\s*#\s*include\b|\bint\s+main\s*\(/m;
const FORTRAN =
  /^\s*(program|module|subroutine|(\w+\s+)*function|use|implicit\s+none)\b|^\s*!\$acc/im;

// OpenACC and OpenMP directives, as idrrun/highlight.py finds them: C's and C++'s pragmas, and
// Fortran's free-form sentinels (any case; `!$acc&` continues one). The white space before them
// is not part of them.
const C_DIRECTIVE = /^([ \t]*)#[ \t]*pragma[ \t]+(acc|omp)\b/;
const FORTRAN_DIRECTIVE = /^([ \t]*)!\$(acc|omp)\b/i;

/** Where the directive on this line starts, or null when the line holds none. */
export function directiveStart(
  line: string,
  language: IdrrunLanguage
): number | null {
  const found = (language === 'fortran' ? FORTRAN_DIRECTIVE : C_DIRECTIVE).exec(
    line
  );
  return found ? found[1].length : null;
}

/** The offset of the end of the magic line (its newline, or the text's end), or null when the
 * text is not an idrrun cell. */
export function magicLineEnd(text: string): number | null {
  const magic = MAGIC.exec(text);
  if (!magic) {
    return null;
  }
  const newline = text.indexOf('\n', magic[0].length);
  return newline < 0 ? text.length : newline;
}

/** The language of an idrrun cell, or null when the text is not an idrrun cell. */
export function idrrunLanguage(text: string): IdrrunLanguage | null {
  const magic = MAGIC.exec(text);
  if (!magic) {
    return null;
  }
  const rest = text.slice(magic[0].length);
  const newline = rest.indexOf('\n');
  const line = newline < 0 ? rest : rest.slice(0, newline);
  const body = newline < 0 ? '' : rest.slice(newline + 1);
  return givenLanguage(line) ?? guessLanguage(body) ?? 'c';
}

/** idrrun/source.py guess_language. */
export function guessLanguage(text: string): IdrrunLanguage | null {
  if (CUDA.test(text)) {
    return 'cuda';
  }
  if (CXX.test(text)) {
    return 'c++';
  }
  if (C.test(text)) {
    return 'c';
  }
  if (FORTRAN.test(text)) {
    return 'fortran';
  }
  return null;
}

/** The value of `-l`/`--language` on the magic line, when it names a language idrrun knows. */
function givenLanguage(line: string): IdrrunLanguage | null {
  const words = splitWords(line);
  let found: string | null = null;
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    if (WORD_LIST_OPTIONS.has(word)) {
      i++;
    } else if (word === '-l' || word === '--language') {
      found = words[i + 1] ?? null;
      i++;
    } else if (word.startsWith('--language=')) {
      found = word.slice('--language='.length);
    } else if (word.startsWith('-l') && !word.startsWith('--')) {
      found = word.slice(2);
    }
  }
  // As argparse does, the last one given wins; an unknown name leaves the guess to the body.
  const name = found?.toLowerCase() ?? '';
  return LANGUAGES.has(name) ? (name as IdrrunLanguage) : null;
}

/** Words as POSIX shell quoting splits them (idrrun reads the line with shlex). */
function splitWords(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) {
        quote = null;
      } else if (ch === '\\' && quote === '"' && (line[i + 1] === '"' || line[i + 1] === '\\')) {
        word += line[++i];
      } else {
        word += ch;
      }
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) {
        words.push(word);
        word = '';
        inWord = false;
      }
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) {
    words.push(word);
  }
  return words;
}
