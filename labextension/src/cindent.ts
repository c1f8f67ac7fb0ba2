/**
 * C's indentation in a `%%idrrun` cell, from its brackets: a line inside `{ … }` goes one unit
 * further than the line that opened the block, `}` back to it; inside `( … )` a line lines up
 * after the parenthesis (or goes one unit further when nothing follows it); the statement of a
 * `for (…)`, `if (…)`, `while (…)` or `else` without braces, and a statement that goes on, one
 * unit further. Preprocessor lines (`#pragma acc …`) and comments open nothing.
 *
 * JupyterLab's C language indents by its syntax tree, which Lezer's C++ grammar (as JupyterLab
 * bundles it) cannot build for a block still open at the end of the text: `for (;;) {` as the
 * last line parses as an error, and the line after it went to column 0. A cell is typed at its
 * end, line after line, so its indentation is read from its brackets instead, which an open
 * block does not disturb.
 */

/** An opening bracket not closed before the cursor. */
interface Open {
  ch: string;
  indent: number; // the indentation of its line
  column: number; // the column just after it
  followed: boolean; // code follows it on its line
}

const CLOSING: Record<string, string> = { ')': '(', ']': '[', '}': '{' };

/** The column that `text` reaches, tabs counted to the next multiple of `tabSize`. */
function columnOf(text: string, tabSize: number): number {
  let column = 0;
  for (const ch of text) {
    column = ch === '\t' ? column + tabSize - (column % tabSize) : column + 1;
  }
  return column;
}

/** What the scan of the text before the cursor found. */
interface Scan {
  open: Open[];
  lastCode: string; // the code of the last line that has some (comments left out, trimmed)
}

/** The brackets still open at the end of `text`, and its last line of code. */
function scan(text: string, tabSize: number): Scan {
  const open: Open[] = [];
  let lastCode = '';
  let inComment = false;
  let continued = false; // a preprocessor line that ends with a backslash goes on
  for (const line of text.split('\n')) {
    const indent = columnOf(/^\s*/.exec(line)![0], tabSize);
    const preprocessor: boolean = continued || (!inComment && /^\s*#/.test(line));
    continued = preprocessor && line.endsWith('\\');
    if (preprocessor) {
      continue;
    }
    let code = '';
    let quote: string | null = null;
    for (let i = 0; i < line.length; i++) {
      const ch = line[i];
      if (inComment) {
        if (ch === '*' && line[i + 1] === '/') {
          inComment = false;
          i++;
        }
        continue;
      }
      if (quote) {
        code += ch;
        if (ch === '\\') {
          code += line[++i] ?? '';
        } else if (ch === quote) {
          quote = null;
        }
        continue;
      }
      if (ch === '/' && line[i + 1] === '/') {
        break;
      }
      if (ch === '/' && line[i + 1] === '*') {
        inComment = true;
        i++;
        continue;
      }
      code += ch;
      if (ch === '"' || ch === "'") {
        quote = ch;
      } else if (ch === '{' || ch === '(' || ch === '[') {
        const rest = line.slice(i + 1).replace(/\/\/.*|\/\*.*/, '');
        open.push({
          ch,
          indent,
          column: columnOf(line.slice(0, i + 1), tabSize),
          followed: /\S/.test(rest)
        });
      } else if (ch in CLOSING) {
        // A stray closer closes nothing; a mismatched one closes up to its own opener.
        const at = open.map(o => o.ch).lastIndexOf(CLOSING[ch]);
        if (at >= 0) {
          open.length = at;
        }
      }
    }
    if (code.trim()) {
      lastCode = code.trim();
    }
  }
  return { open, lastCode };
}

/**
 * The indentation of the line whose text after the cursor is `after`, with `before` the cell's
 * body up to the cursor; `unit` columns per level.
 */
export function cIndent(before: string, after: string, unit: number, tabSize: number): number {
  const { open, lastCode } = scan(before, tabSize);
  const next = after.trimStart();
  const top = open[open.length - 1];
  if (top && top.ch !== '{') {
    if (next.startsWith(top.ch === '(' ? ')' : ']')) {
      return top.indent;
    }
    return top.followed ? top.column : top.indent + unit;
  }
  if (next.startsWith('}')) {
    return top ? top.indent : 0;
  }
  const block = top ? top.indent + unit : 0;
  if (next.startsWith('{') || next.startsWith('#')) {
    return block; // a block's brace, a directive: at the statement's level
  }
  // The statement of `for (…)`, `if (…)` or `else` without braces, or one that goes on.
  const goesOn = lastCode !== '' && !/[;{}:]$/.test(lastCode);
  return goesOn ? block + unit : block;
}
