/**
 * The Assignments panel: the class's exchange in JupyterLab's left sidebar, so that a student
 * works, hands in and reads her feedback without a terminal (nbgrader's users have Fetch, Submit
 * and Feedback buttons). Each released assignment with its deadline and her last submission;
 * Fetch copies it into her folder; Submit saves her open documents of that folder first (a
 * student who ran her port but did not save would hand in the release), hands in what she
 * changed and shows what was received and when; Feedback opens hers as a rendered document.
 *
 * Everything goes through her own Jupyter server (idrrun/lab.py), which asks the exchange's
 * receiver as `idrrun classroom` does: the panel holds no token and decides nothing.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ServerConnection } from '@jupyterlab/services';
import { listIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

const ROUTE = 'idrrun/exchange';

interface Receipt {
  number: number;
  received_at: string;
  late: boolean;
  text?: string;
  unchanged?: string[];
}

interface Assignment {
  exercise: string;
  deadline: string | null;
  files: string[];
  last: Receipt | null;
  feedback: boolean;
  fetched: boolean;
}

/** A request to her server's routes; the server's message when it refuses. */
async function call<T>(path: string, method = 'GET', body?: unknown): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = `${settings.baseUrl.replace(/\/$/, '')}/${ROUTE}/${path}`;
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
  }
  const reply = await ServerConnection.makeRequest(url, init, settings);
  const data = await reply.json().catch(() => ({}));
  if (!reply.ok) {
    throw new Error(data.message ?? `${reply.status} ${reply.statusText}`);
  }
  return data as T;
}

/** Her open documents below FOLDER/, saved when they have changes. */
async function saveOpen(app: JupyterFrontEnd, folder: string): Promise<number> {
  let saved = 0;
  for (const widget of Array.from(app.shell.widgets('main'))) {
    // A document's widget has a context (DocumentWidget); others are left alone.
    const context = (widget as any).context;
    if (context?.path?.startsWith(`${folder}/`) && context.model?.dirty) {
      await context.save();
      saved++;
    }
  }
  return saved;
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text = '',
  className = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.textContent = text;
  if (className) {
    node.className = className;
  }
  return node;
}

export class AssignmentsPanel extends Widget {
  constructor(private readonly app: JupyterFrontEnd) {
    super();
    this.id = 'idrrun-assignments';
    this.title.icon = listIcon;
    this.title.caption = 'Assignments';
    this.addClass('idrrun-assignments');
    this.node.style.padding = '8px';
    this.node.style.overflowY = 'auto';
    const header = element('div');
    header.appendChild(element('h3', 'Assignments'));
    const refresh = element('button', 'Refresh', 'jp-mod-styled idrrun-refresh');
    refresh.onclick = () => void this.refresh();
    header.appendChild(refresh);
    this.node.appendChild(header);
    this.list = element('div', '', 'idrrun-assignment-list');
    this.node.appendChild(this.list);
    this.status = element('pre', '', 'idrrun-assignment-status');
    this.status.style.whiteSpace = 'pre-wrap';
    this.status.style.fontSize = 'var(--jp-ui-font-size1)';
    this.node.appendChild(this.status);
  }

  /** The assignments released to her, as the receiver lists them. */
  async refresh(): Promise<void> {
    try {
      const answer = await call<{ assignments: Assignment[]; message?: string }>('assignments');
      this.draw(answer.assignments);
      this.say(answer.message ?? '');
    } catch (reason) {
      this.list.textContent = '';
      this.say(`${(reason as Error).message}`);
    }
  }

  private say(text: string): void {
    this.status.textContent = text;
  }

  private draw(assignments: Assignment[]): void {
    this.list.textContent = '';
    if (assignments.length === 0) {
      this.list.appendChild(element('p', 'No assignment is released to you yet.'));
    }
    for (const task of assignments) {
      const box = element('div', '', 'idrrun-assignment');
      box.dataset.exercise = task.exercise;
      box.style.borderBottom = '1px solid var(--jp-border-color2)';
      box.style.padding = '6px 0';
      box.appendChild(element('strong', task.exercise, 'idrrun-assignment-name'));
      box.appendChild(
        element('div', `deadline: ${task.deadline ?? 'none'}`, 'idrrun-deadline')
      );
      const last = task.last
        ? `submitted ${task.last.received_at}${task.last.late ? ' (late)' : ''}, submission ${task.last.number}`
        : 'not submitted';
      box.appendChild(element('div', last, 'idrrun-last'));
      const buttons = element('div');
      buttons.appendChild(this.button('Fetch', 'idrrun-fetch', () => this.fetch(task)));
      buttons.appendChild(this.button('Submit', 'idrrun-submit', () => this.submit(task)));
      const feedback = this.button('Feedback', 'idrrun-feedback', () => this.feedback(task));
      feedback.disabled = !task.feedback;
      buttons.appendChild(feedback);
      box.appendChild(buttons);
      this.list.appendChild(box);
    }
  }

  private button(label: string, className: string, act: () => Promise<void>): HTMLButtonElement {
    const button = element('button', label, `jp-mod-styled ${className}`);
    button.style.marginRight = '4px';
    button.onclick = async () => {
      button.disabled = true;
      try {
        await act();
      } catch (reason) {
        this.say(`${label}: ${(reason as Error).message}`);
      } finally {
        button.disabled = false;
      }
    };
    return button;
  }

  private async fetch(task: Assignment): Promise<void> {
    const answer = await call<{ files: { path: string; written: boolean }[] }>(
      `fetch/${task.exercise}`,
      'POST'
    );
    await this.refresh();
    this.say(
      answer.files
        .map(f => `${f.path}${f.written ? '' : ' (kept: yours already)'}`)
        .join('\n')
    );
    const first = answer.files.find(f => f.path.endsWith('.ipynb')) ?? answer.files[0];
    if (first) {
      await this.app.commands.execute('docmanager:open', { path: first.path });
    }
  }

  private async submit(task: Assignment): Promise<void> {
    const saved = await saveOpen(this.app, task.exercise);
    const receipt = await call<Receipt>(`submit/${task.exercise}`, 'POST', { files: null });
    await this.refresh();
    this.say(
      (saved ? `saved ${saved} open document${saved > 1 ? 's' : ''} first\n` : '') +
        (receipt.text ?? `received at ${receipt.received_at}`)
    );
  }

  private async feedback(task: Assignment): Promise<void> {
    const answer = await call<{ path: string }>(`feedback/${task.exercise}`, 'POST');
    await this.app.commands.execute('docmanager:open', {
      path: answer.path,
      factory: 'Markdown Preview'
    });
    this.say(`your feedback: ${answer.path}`);
  }

  private readonly list: HTMLDivElement;
  private readonly status: HTMLPreElement;
}

export const assignmentsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'idrrun-highlight:assignments',
  description: "The class's assignments: fetch, submit, feedback.",
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    const panel = new AssignmentsPanel(app);
    app.shell.add(panel, 'left', { rank: 700 });
    void app.restored.then(() => panel.refresh());
  }
};
