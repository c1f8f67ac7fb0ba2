/**
 * A `%%idrrun` cell as one language: the magic line, then the body in C, C++ or Fortran.
 *
 * Given the body's language alone, the whole cell would be parsed as C or Fortran, the magic
 * line included: C's parser reads `%%idrrun -a` as the start of an expression that goes on to
 * the next lines, and indents them by 4 as a continued statement. Here the cell's own parser
 * splits the text into the magic line and the body, and the body's language parses the body
 * alone, mounted in the cell's tree (as Markdown mounts the language of a fenced code block):
 * the body is highlighted, indented and commented as the body's language says, and the magic
 * line is shown as IPython shows it (`%%` an operator, `idrrun` a keyword), as
 * idrrun/highlight.py does in exported notebooks.
 */

import {
  Language,
  LanguageSupport,
  defineLanguageFacet,
  languageDataProp
} from '@codemirror/language';
import {
  Input,
  NodeSet,
  NodeType,
  Parser,
  PartialParse,
  Tree,
  TreeFragment,
  parseMixed
} from '@lezer/common';
import { Extension } from '@codemirror/state';
import { styleTags, tags } from '@lezer/highlight';

/** The cell's own language data: none (its body's comes from the body's nodes). */
const cellData = defineLanguageFacet({});

const CELL = 0;
const MAGIC = 1;
const MARK = 2;
const NAME = 3;
const FLAGS = 4;
const BODY = 5;

const nodeSet = new NodeSet([
  NodeType.define({
    id: CELL,
    name: 'IdrrunCell',
    top: true,
    props: [[languageDataProp, cellData]]
  }),
  NodeType.define({ id: MAGIC, name: 'MagicLine' }),
  NodeType.define({ id: MARK, name: 'MagicMark' }),
  NodeType.define({ id: NAME, name: 'MagicName' }),
  NodeType.define({ id: FLAGS, name: 'MagicFlags' }),
  NodeType.define({ id: BODY, name: 'Body' })
]).extend(
  styleTags({
    MagicMark: tags.operator,
    MagicName: tags.keyword
  })
);

// The magic as IPython finds it (blank lines and indentation before it are allowed).
const MAGIC_LINE = /^(\s*)(%%)(idrrun)([^\n]*)/;

function leaf(type: number, length: number): Tree {
  return new Tree(nodeSet.types[type], [], [], length);
}

/** The cell's tree: the magic line and its parts, then the body (empty, for the body's parser
 * to be mounted on). */
function cellTree(text: string): Tree {
  const found = MAGIC_LINE.exec(text);
  if (!found) {
    return new Tree(nodeSet.types[CELL], [leaf(BODY, text.length)], [0], text.length);
  }
  const [line, space, mark, name, flags] = found;
  const children = [leaf(MARK, mark.length), leaf(NAME, name.length)];
  const positions = [0, mark.length];
  if (flags.length) {
    children.push(leaf(FLAGS, flags.length));
    positions.push(mark.length + name.length);
  }
  const magicLength = line.length - space.length;
  const magic = new Tree(nodeSet.types[MAGIC], children, positions, magicLength);
  const bodyFrom = Math.min(line.length + 1, text.length);
  return new Tree(
    nodeSet.types[CELL],
    [magic, leaf(BODY, text.length - bodyFrom)],
    [space.length, bodyFrom],
    text.length
  );
}

/** A parse that is done as soon as it starts (the cell's own tree is cheap to make). */
class Done implements PartialParse {
  readonly parsedPos: number;
  stoppedAt: number | null = null;

  constructor(private readonly tree: Tree) {
    this.parsedPos = tree.length;
  }

  advance(): Tree {
    return this.tree;
  }

  stopAt(pos: number): void {
    this.stoppedAt = pos;
  }
}

/** The cell's parser: its own tree, the body parsed by the body's parser. */
class CellParser extends Parser {
  constructor(body: Parser) {
    super();
    this.mount = parseMixed(node =>
      node.type.id === BODY && node.to > node.from ? { parser: body } : null
    );
  }

  createParse(
    input: Input,
    fragments: readonly TreeFragment[],
    ranges: readonly { from: number; to: number }[]
  ): PartialParse {
    const tree = cellTree(input.read(0, input.length));
    return this.mount(new Done(tree), input, fragments, ranges);
  }

  private readonly mount: ReturnType<typeof parseMixed>;
}

/** A `%%idrrun` cell whose body is in the language `body` supports; `extra`: what the body's
 * language lacks (Fortran's indentation). */
export function cellSupport(body: LanguageSupport, extra: Extension = []): LanguageSupport {
  const language = new Language(
    cellData,
    new CellParser(body.language.parser),
    [],
    `idrrun-${body.language.name}`
  );
  return new LanguageSupport(language, [body.support, extra]);
}
