/**
 * JupyterLab 4 / Notebook 7: `%%idrrun` cells highlighted as C, C++ or Fortran.
 *
 * JupyterLab gives every code cell of a notebook the kernel's language (IPython), and has no
 * per-cell-magic modes (jupyterlab/jupyterlab#15324). Setting a cell model's mimeType, as
 * CodeMirror 5 era extensions did, fights the notebook, which resets it whenever a cell is
 * inserted or the kernel's language_info changes. Here each editor gets a CodeMirror 6 extension
 * instead: a compartment of its own that holds, at the highest precedence, the language JupyterLab
 * bundles for C, C++ or Fortran while the cell starts with `%%idrrun`, and nothing otherwise, so
 * the editor's own (IPython) language shows again as soon as the magic line goes away.
 */

import { Compartment, Extension, Prec } from '@codemirror/state';
import { EditorView, ViewPlugin, ViewUpdate } from '@codemirror/view';
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

import { IdrrunLanguage, idrrunLanguage } from './language';

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

type LoadSupport = (mimeType: string) => Promise<Extension>;

/** Follows one editor: its text and its model's MIME type decide what the compartment holds. */
class CellLanguage {
  constructor(
    private readonly view: EditorView,
    private readonly model: CodeEditor.IModel,
    private readonly compartment: Compartment,
    private readonly load: LoadSupport
  ) {
    model.mimeTypeChanged.connect(this.refresh, this);
    this.refresh();
  }

  update(update: ViewUpdate): void {
    if (update.docChanged) {
      this.refresh();
    }
  }

  destroy(): void {
    this.destroyed = true;
    this.model.mimeTypeChanged.disconnect(this.refresh, this);
  }

  private refresh(): void {
    const language = PYTHON_MIME_TYPES.has(this.model.mimeType)
      ? idrrunLanguage(this.view.state.doc.toString())
      : null;
    const wanted = language === null ? null : MIME_TYPES[language];
    if (wanted === this.shown) {
      return;
    }
    this.shown = wanted;
    // Always asynchronous: a view may not be changed while it is being updated.
    const support = wanted === null ? Promise.resolve([]) : this.load(wanted);
    void support.then(extension => {
      if (this.destroyed || this.shown !== wanted) {
        return;
      }
      this.view.dispatch({
        effects: this.compartment.reconfigure(Prec.highest(extension))
      });
    });
  }

  private shown: string | null = null;
  private destroyed = false;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'idrrun-highlight:plugin',
  description: 'Highlights %%idrrun cells as C, C++ or Fortran.',
  autoStart: true,
  requires: [IEditorExtensionRegistry, IEditorLanguageRegistry],
  activate: (
    app: JupyterFrontEnd,
    extensions: IEditorExtensionRegistry,
    languages: IEditorLanguageRegistry
  ): void => {
    const loaded = new Map<string, Promise<Extension>>();
    const load: LoadSupport = mimeType => {
      let support = loaded.get(mimeType);
      if (!support) {
        support = languages
          .getLanguage(mimeType)
          .then(language => language?.support ?? [])
          .catch(reason => {
            console.warn(`idrrun: no ${mimeType} mode in this JupyterLab`, reason);
            return [];
          });
        loaded.set(mimeType, support);
      }
      return support;
    };
    extensions.addExtension({
      name: 'idrrun-highlight:cell-language',
      factory: ({ model }) => {
        const compartment = new Compartment();
        return EditorExtensionRegistry.createImmutableExtension([
          compartment.of([]),
          ViewPlugin.define(
            view => new CellLanguage(view, model, compartment, load)
          )
        ]);
      }
    });
  }
};

export default plugin;
