/**
 * JupyterLab 4 / Notebook 7: `%%idrrun` cells edited as C, C++ or Fortran.
 *
 * JupyterLab gives every code cell of a notebook the kernel's language (IPython), and has no
 * per-cell-magic modes (jupyterlab/jupyterlab#15324). Setting a cell model's mimeType, as
 * CodeMirror 5 era extensions did, fights the notebook, which resets it whenever a cell is
 * inserted or the kernel's language_info changes. Here each editor gets a CodeMirror 6 extension
 * instead: a compartment of its own that holds, at the highest precedence, the language JupyterLab
 * bundles for C, C++ or Fortran while the cell starts with `%%idrrun`, and nothing otherwise, so
 * the editor's own (IPython) language shows again as soon as the magic line goes away.
 *
 * The body's language takes over in the very transaction that makes the cell an idrrun cell (the
 * languages are loaded when the plugin starts), so the Enter typed after `%%idrrun` is indented by
 * C's or Fortran's rules, never by Python's. Until a language is loaded, and for the line after
 * the magic line (which is no code of the body), a line keeps the indentation of the one above.
 * C's lines are indented from their brackets (cindent.ts), Fortran's from their statements
 * (fortran.ts): neither language JupyterLab bundles indents a cell typed at its end.
 *
 * OpenACC and OpenMP directives (`#pragma acc`, `#pragma omp`, `!$acc`, `!$omp`) are marked with
 * the class `cm-idrrun-directive` and drawn in the editor's colour for directives (the one of
 * `#include`): in Fortran they are comments to the language, which would draw them as comments.
 * idrrun/highlight.py gives them the same token (Comment.Preproc) in exported notebooks.
 */

import { indentService } from '@codemirror/language';
import {
  Compartment,
  EditorState,
  Extension,
  Prec,
  RangeSetBuilder,
  StateEffect,
  StateField,
  Text
} from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  ViewPlugin,
  ViewUpdate
} from '@codemirror/view';
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { CodeEditor } from '@jupyterlab/codeeditor';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';

import { assignmentsPlugin } from './assignments';
import { cellSupport } from './cell';
import { cIndent } from './cindent';
import { fortranIndentation } from './fortran';
import {
  IdrrunLanguage,
  directiveStart,
  idrrunLanguage,
  magicLineEnd
} from './language';

/** The modes JupyterLab bundles, by MIME type (CUDA is C++ with a few keywords more). */
const MIME_TYPES: Record<IdrrunLanguage, string> = {
  c: 'text/x-csrc',
  'c++': 'text/x-c++src',
  cuda: 'text/x-c++src',
  fortran: 'text/x-fortran'
};

/** Editors where `%%idrrun` means the magic: IPython code cells and consoles. */
const PYTHON_MIME_TYPES: ReadonlySet<string> = new Set([
  'text/x-ipython',
  'text/x-python'
]);

/** The class of a directive's text, and how it is drawn. */
const DIRECTIVE_CLASS = 'cm-idrrun-directive';
const directiveMark = Decoration.mark({ class: DIRECTIVE_CLASS });
// The comment's colour and italics are on spans inside the mark: the rule reaches them too.
const directiveTheme = EditorView.baseTheme({
  [`.${DIRECTIVE_CLASS}, .${DIRECTIVE_CLASS} span`]: {
    color: 'var(--jp-mirror-editor-meta-color)',
    fontStyle: 'normal'
  }
});

/** The languages, loaded once: a promise for each, and the ones already there. */
class Supports {
  constructor(private readonly languages: IEditorLanguageRegistry) {}

  /** Start loading every language an idrrun cell can show. */
  preload(): void {
    for (const mimeType of new Set(Object.values(MIME_TYPES))) {
      void this.load(mimeType);
    }
  }

  load(mimeType: string): Promise<Extension> {
    let support = this.loading.get(mimeType);
    if (!support) {
      support = this.languages
        .getLanguage(mimeType)
        .then(language => {
          if (!language?.support) {
            return [];
          }
          const extra =
            mimeType === MIME_TYPES.fortran
              ? fortranIndentation(language.support)
              : [];
          return cellSupport(language.support, extra);
        })
        .catch(reason => {
          console.warn(`idrrun: no ${mimeType} mode in this JupyterLab`, reason);
          return [];
        })
        .then(extension => {
          this.ready.set(mimeType, extension);
          return extension;
        });
      this.loading.set(mimeType, support);
    }
    return support;
  }

  /** The language's extension when it is loaded, else undefined. */
  now(mimeType: string): Extension | undefined {
    return this.ready.get(mimeType);
  }

  private readonly loading = new Map<string, Promise<Extension>>();
  private readonly ready = new Map<string, Extension>();
}

/** The MIME type of the language a cell is shown in: null for the editor's own. */
const setShown = StateEffect.define<string | null>();
const shownField = StateField.define<string | null>({
  create: () => null,
  update: (value, tr) => {
    for (const effect of tr.effects) {
      if (effect.is(setShown)) {
        value = effect.value;
      }
    }
    return value;
  }
});

/** One editor's language: what it should show, and the effects that show it. */
class CellState {
  constructor(
    private readonly model: CodeEditor.IModel,
    private readonly compartment: Compartment,
    readonly supports: Supports
  ) {}

  /** The idrrun cell's language, or null when the editor shows its own. */
  language(doc: Text): IdrrunLanguage | null {
    return PYTHON_MIME_TYPES.has(this.model.mimeType)
      ? idrrunLanguage(doc.toString())
      : null;
  }

  wanted(doc: Text): string | null {
    const language = this.language(doc);
    return language === null ? null : MIME_TYPES[language];
  }

  /** The effects that show `wanted` with the given extension. */
  show(wanted: string | null, extension: Extension): StateEffect<unknown>[] {
    return [
      this.compartment.reconfigure(Prec.highest(extension)),
      setShown.of(wanted)
    ];
  }

  /** The effects that show what the new document wants, when its language is loaded. */
  follow(state: EditorState, doc: Text): StateEffect<unknown>[] | null {
    const wanted = this.wanted(doc);
    if (wanted === state.field(shownField)) {
      return null;
    }
    const extension = wanted === null ? [] : this.supports.now(wanted);
    return extension === undefined ? null : this.show(wanted, extension);
  }
}

/** Applies what the transactions could not: a language still loading, a new MIME type. */
class CellLanguage {
  decorations: DecorationSet;

  constructor(
    private readonly view: EditorView,
    private readonly cell: CellState,
    private readonly model: CodeEditor.IModel
  ) {
    model.mimeTypeChanged.connect(this.refresh, this);
    this.decorations = this.directives();
    this.refresh();
  }

  update(update: ViewUpdate): void {
    const shown = update.state.field(shownField);
    if (
      update.docChanged ||
      update.viewportChanged ||
      shown !== update.startState.field(shownField)
    ) {
      this.decorations = this.directives();
    }
    if (update.docChanged) {
      this.refresh();
    }
  }

  destroy(): void {
    this.destroyed = true;
    this.model.mimeTypeChanged.disconnect(this.refresh, this);
  }

  /** The directives of the visible lines, in the language shown. */
  private directives(): DecorationSet {
    const builder = new RangeSetBuilder<Decoration>();
    const state = this.view.state;
    const language = this.cell.language(state.doc);
    if (language === null || state.field(shownField) === null) {
      return builder.finish();
    }
    let last = 0;
    let continued = false;
    for (const { from, to } of this.view.visibleRanges) {
      for (let pos = from; pos <= to; ) {
        const line = state.doc.lineAt(pos);
        pos = line.to + 1;
        if (line.number <= last) {
          continue;
        }
        last = line.number;
        const start: number | null = continued
          ? 0
          : directiveStart(line.text, language);
        if (start !== null && start < line.length) {
          builder.add(line.from + start, line.to, directiveMark);
        }
        // A C directive goes on after a backslash at the end of its line.
        continued =
          start !== null && language !== 'fortran' && line.text.endsWith('\\');
      }
    }
    return builder.finish();
  }

  private refresh(): void {
    const wanted = this.cell.wanted(this.view.state.doc);
    if (wanted === this.view.state.field(shownField) || wanted === this.pending) {
      return;
    }
    this.pending = wanted;
    const support =
      wanted === null ? Promise.resolve([]) : this.cell.supports.load(wanted);
    // Always asynchronous: a view may not be changed while it is being updated.
    void support.then(extension => {
      if (this.pending === wanted) {
        this.pending = undefined;
      }
      const state = this.view.state;
      if (
        this.destroyed ||
        this.cell.wanted(state.doc) !== wanted ||
        state.field(shownField) === wanted
      ) {
        return;
      }
      this.view.dispatch({ effects: this.cell.show(wanted, extension) });
    });
  }

  private pending: string | null | undefined = undefined;
  private destroyed = false;
}

/** The editor extension of one cell. */
function cellExtension(model: CodeEditor.IModel, supports: Supports): Extension {
  const compartment = new Compartment();
  const cell = new CellState(model, compartment, supports);
  return [
    shownField,
    compartment.of([]),
    // The language follows the text in the transaction that changes it.
    EditorState.transactionExtender.of(tr => {
      if (!tr.docChanged) {
        return null;
      }
      const effects = cell.follow(tr.startState, tr.newDoc);
      return effects === null ? null : { effects };
    }),
    Prec.highest(
      indentService.of((context, pos) => {
        const state = context.state;
        if (cell.language(state.doc) === null) {
          return undefined; // not an idrrun cell: the editor's own rules
        }
        const magicEnd = magicLineEnd(state.doc.toString());
        if (magicEnd !== null && pos <= magicEnd + 1) {
          return null; // the magic line and the one after it: as the line above
        }
        // Python's rules never apply here: until the body's language is shown, a line keeps
        // the indentation of the one above; then Fortran's own (fortran.ts), and C's, C++'s
        // and CUDA's from the brackets (cindent.ts: JupyterLab's C grammar cannot parse a
        // block still open at the cell's end, where a cell is typed).
        if (state.field(shownField) !== cell.wanted(state.doc) || magicEnd === null) {
          return null;
        }
        if (cell.language(state.doc) === 'fortran') {
          return undefined;
        }
        return cIndent(
          state.sliceDoc(magicEnd + 1, pos),
          context.textAfterPos(pos),
          context.unit,
          state.tabSize
        );
      })
    ),
    ViewPlugin.define(view => new CellLanguage(view, cell, model), {
      decorations: plugin => plugin.decorations
    }),
    directiveTheme
  ];
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'idrrun-highlight:plugin',
  description: 'Edits %%idrrun cells as C, C++ or Fortran.',
  autoStart: true,
  requires: [IEditorExtensionRegistry, IEditorLanguageRegistry],
  activate: (
    app: JupyterFrontEnd,
    extensions: IEditorExtensionRegistry,
    languages: IEditorLanguageRegistry
  ): void => {
    const supports = new Supports(languages);
    supports.preload();
    extensions.addExtension({
      name: 'idrrun-highlight:cell-language',
      factory: ({ model }) =>
        EditorExtensionRegistry.createImmutableExtension(
          cellExtension(model, supports)
        )
    });
  }
};

export default [plugin, assignmentsPlugin];
