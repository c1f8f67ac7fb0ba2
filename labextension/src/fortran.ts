/**
 * Fortran's indentation in a `%%idrrun` cell: a line after a block's opening (`do`, `if … then`,
 * `program`, `subroutine`, `select case`, …) goes one unit further, a line that closes or splits
 * a block (`end …`, `else`, `case`, `contains`) one unit back.
 *
 * JupyterLab's Fortran is CodeMirror 5's legacy mode, which has no indentation of its own: an
 * editor with it keeps the line above's, so a loop's body would start where its `do` does. C's
 * language (Lezer's C++) indents by its syntax tree and needs nothing here. Free-form Fortran is
 * read line by line: the line above's code (its comment left out), not a parse; a directive
 * (`!$acc parallel loop`) is a comment and keeps its line's indentation for the `do` below it.
 */

import { IndentContext, LanguageSupport, indentService } from '@codemirror/language';
import { Extension } from '@codemirror/state';

// A construct's name (`outer: do`) or a statement label (`10 continue`) before the keyword.
const LABEL = /^(?:[a-z_]\w*\s*:(?!:)\s*|\d+\s+)/;

// Statements after which the next line is indented. Matched on the code of a line in lower case,
// its label left out; `end …` is never one (checked first).
const OPENS: readonly RegExp[] = [
  /\bthen$/, // if (…) then, else if (…) then
  /^else$/,
  /^elsewhere\b/,
  /^do\b(?!\s*\d)/, // do, do while, do concurrent (not the labelled `do 10 i = …`)
  /^select\s*(case|type|rank)\b/,
  /^(case|type\s+is|class\s+is|class\s+default|rank)\b/,
  /^contains$/,
  /^(program|submodule|block|critical|enum\b|(abstract\s+)?interface)\b/,
  /^module\s+(?!procedure\b)\w/,
  /(^|[\s,)*])(subroutine|function)\s+\w/, // with its prefixes: pure, integer, recursive, …
  /^type\s*(,[^:]*)?::\s*\w+$/, // type :: point, type, bind(c) :: point
  /^type\s+(?!is\b)\w+$/, // type point
  /^associate\s*\(/
];

// Statements that go one unit back from the line above: they close or split a block.
const CLOSES =
  /^(end\b|end(do|if|select|where|forall|program|module|submodule|subroutine|function|type|interface|block|associate|critical|enum)\b|else\b|elseif\b|elsewhere\b|case\b|contains\b|type\s+is\b|class\s+(is|default)\b|rank\b)/;

/** What typing on a line re-indents it: a closing keyword once it is whole. */
export const FORTRAN_INDENT_ON_INPUT =
  /^\s*(end\s|end(do|if|select|where|program|module|subroutine|function|type|interface)$|else$|else\s|contains$|case\s)/i;

/** The line's code: its `!` comment left out (a `!` in a string is kept), trimmed, lower case,
 * its label left out. */
export function fortranCode(line: string): string {
  let quote: string | null = null;
  let end = line.length;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) {
        quote = null;
      }
    } else if (ch === '"' || ch === "'") {
      quote = ch;
    } else if (ch === '!') {
      end = i;
      break;
    }
  }
  return line.slice(0, end).trim().toLowerCase().replace(LABEL, '');
}

/** Whether the line after this code is indented one unit more. */
export function opensBlock(code: string): boolean {
  if (/^end/.test(code) && CLOSES.test(code)) {
    return false;
  }
  return OPENS.some(pattern => pattern.test(code)) || blockWhere(code);
}

/** Whether the line holding this code goes one unit back. */
export function closesBlock(code: string): boolean {
  return CLOSES.test(code);
}

/** `where (mask)` or `forall (…)` alone on its line opens a block; with a statement after the
 * parentheses it is one statement. */
function blockWhere(code: string): boolean {
  const found = /^(where|forall)\s*\(/.exec(code);
  if (!found) {
    return false;
  }
  let depth = 0;
  for (let i = found[0].length - 1; i < code.length; i++) {
    if (code[i] === '(') {
      depth++;
    } else if (code[i] === ')' && --depth === 0) {
      return i === code.length - 1;
    }
  }
  return false;
}

/** The indentation of the line that starts at `pos`, from the nearest line above that is not
 * blank; undefined above the body (the cell's other rules decide there). */
function fortranIndent(cx: IndentContext, pos: number): number | null | undefined {
  let above = cx.lineAt(pos, -1);
  if (above.from === pos) {
    if (pos === 0) {
      return undefined;
    }
    above = cx.lineAt(pos - 1, -1);
  }
  while (!/\S/.test(above.text)) {
    if (above.from === 0) {
      return undefined;
    }
    above = cx.lineAt(above.from - 1, -1);
  }
  if (/^\s*%%/.test(above.text)) {
    return undefined; // the magic line: no code above
  }
  const code = fortranCode(cx.textAfterPos(pos, 1));
  const step = (opensBlock(fortranCode(above.text)) ? 1 : 0) - (closesBlock(code) ? 1 : 0);
  return Math.max(0, cx.lineIndent(above.from, -1) + step * cx.unit);
}

/** Fortran's indentation, for a cell whose body is in `fortran` (JupyterLab's Fortran): the
 * line after Enter, and a line re-indented as its closing keyword is typed. */
export function fortranIndentation(fortran: LanguageSupport): Extension {
  return [
    indentService.of(fortranIndent),
    fortran.language.data.of({ indentOnInput: FORTRAN_INDENT_ON_INPUT })
  ];
}
