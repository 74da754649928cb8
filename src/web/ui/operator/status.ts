import { CertdeskError } from '../../../core/index.js';
import type { App } from '../../types.js';
import { escapeHtml, hidden, type Lang } from '../page.js';
import {
  form,
  nowOf,
  operatorGet,
  operatorPage,
  operatorPost,
  positiveId,
  relative,
  statusLine,
  when,
  type OperatorPageDeps,
} from './common.js';

// What operators watch: the CA (issuers, keys, expiry, CRL age, distrust marks), the mail outbox
// (newest first, by order) and the jobs the worker gave up on, with a retry button.

const TEXT = {
  en: {
    ca: 'CA status',
    caEmpty: 'There are no CA certificates: run `certdesk ca init`.',
    certificate: 'Certificate',
    role: 'Brand and role',
    key: 'Key',
    until: 'Valid until',
    crl: 'CRL issued',
    crlNext: 'next update',
    noCrl: 'none yet',
    distrust: 'Distrust',
    notDistrusted: 'trusted',
    distrusted: (p1: string, p2: string) => `no new issuance from ${p1}; distrusted from ${p2}`,
    mail: 'Mail outbox',
    mailEmpty: 'No mail.',
    newest: (n: number) => `The newest ${n} mails at most, newest first.`,
    orderFilter: 'Only the mails of order',
    filter: 'Show',
    badOrder: 'The order filter is a positive whole number.',
    created: 'Created',
    status: 'Status',
    kind: 'Kind',
    to: 'To',
    subject: 'Subject',
    order: 'Order',
    jobs: 'Failed jobs',
    jobsEmpty: 'No job has failed for good.',
    jobsLead: 'Jobs the worker gave up on after its retries. A retry runs a job once more, from its first attempt.',
    job: 'Job',
    attempts: 'Attempts',
    failedAt: 'Failed',
    lastError: 'Last error',
    retry: 'Retry',
    action: 'Action',
    retried: (id: number) => `Job ${id} is queued again: the worker runs it shortly.`,
  },
  de: {
    ca: 'CA-Status',
    caEmpty: 'Es gibt keine CA-Zertifikate: Führen Sie `certdesk ca init` aus.',
    certificate: 'Zertifikat',
    role: 'Marke und Rolle',
    key: 'Schlüssel',
    until: 'Gültig bis',
    crl: 'Sperrliste ausgestellt',
    crlNext: 'nächste Aktualisierung',
    noCrl: 'noch keine',
    distrust: 'Misstrauen',
    notDistrusted: 'vertraut',
    distrusted: (p1: string, p2: string) => `keine neuen Zertifikate ab ${p1}; misstraut ab ${p2}`,
    mail: 'E-Mail-Ausgang',
    mailEmpty: 'Keine E-Mails.',
    newest: (n: number) => `Höchstens die ${n} neuesten E-Mails, die neueste zuerst.`,
    orderFilter: 'Nur die E-Mails der Bestellung',
    filter: 'Anzeigen',
    badOrder: 'Der Bestellfilter ist eine positive ganze Zahl.',
    created: 'Erstellt',
    status: 'Status',
    kind: 'Art',
    to: 'An',
    subject: 'Betreff',
    order: 'Bestellung',
    jobs: 'Fehlgeschlagene Jobs',
    jobsEmpty: 'Kein Job ist endgültig fehlgeschlagen.',
    jobsLead:
      'Jobs, die der Worker nach seinen Wiederholungen aufgegeben hat. „Wiederholen“ führt einen Job noch einmal aus, ab dem ersten Versuch.',
    job: 'Job',
    attempts: 'Versuche',
    failedAt: 'Fehlgeschlagen',
    lastError: 'Letzter Fehler',
    retry: 'Wiederholen',
    action: 'Aktion',
    retried: (id: number) => `Job ${id} ist wieder eingereiht: Der Worker führt ihn in Kürze aus.`,
  },
} as const;

const head = (cells: readonly string[]) =>
  `<thead><tr>${cells.map((c) => `<th scope="col">${escapeHtml(c)}</th>`).join('')}</tr></thead>`;
const table = (cells: readonly string[], rows: string[]) =>
  `<table class="op">${head(cells)}<tbody>${rows.join('')}</tbody></table>`;
const plain = (lang: Lang, s: number | null) => (s === null ? '–' : when(lang, s).replace(/<[^>]+>/g, ''));

export function registerOperatorStatus(app: App, deps: OperatorPageDeps): void {
  operatorGet(app, deps, '/operator/ca', async (_request, reply, session, lang) => {
    const t = TEXT[lang];
    const now = nowOf(deps);
    const rows = (await deps.operatorConsole.caStatus()).map(
      (c) =>
        `<tr><td><code>${escapeHtml(c.id)}</code></td><td>${escapeHtml(c.brand)} · ${escapeHtml(c.role)}</td>` +
        `<td>${escapeHtml(c.keyType)}<br><code>${escapeHtml(c.keyId)}</code></td><td>${when(lang, c.notAfter)}</td>` +
        `<td>${
          c.crl === null
            ? t.noCrl
            : `${when(lang, c.crl.thisUpdate)} (${escapeHtml(relative(lang, c.crl.thisUpdate, now))})<br>` +
              `<span class="muted">${t.crlNext} ${escapeHtml(relative(lang, c.crl.nextUpdate, now))}</span>`
        }</td>` +
        `<td>${
          c.distrust === null
            ? t.notDistrusted
            : `<strong class="error">${escapeHtml(t.distrusted(plain(lang, c.distrust.phase1), plain(lang, c.distrust.phase2)))}</strong>`
        }</td></tr>`,
    );
    return operatorPage(
      reply,
      200,
      lang,
      session,
      '/operator/ca',
      t.ca,
      rows.length === 0
        ? `<p>${escapeHtml(t.caEmpty)}</p>`
        : table([t.certificate, t.role, t.key, t.until, t.crl, t.distrust], rows),
    );
  });

  operatorGet(app, deps, '/operator/mail', async (request, reply, session, lang) => {
    const t = TEXT[lang];
    const asked = (request.query as { order?: unknown }).order;
    const filtered = typeof asked === 'string' && asked.trim() !== '';
    const orderId = filtered ? positiveId(asked) : undefined;
    const bad = filtered && orderId === undefined;
    const mails = bad ? [] : await deps.operatorConsole.mail(orderId);
    const rows = mails.map(
      (m) =>
        `<tr><td>${when(lang, m.createdAt)}</td><td>${escapeHtml(m.status)}${m.error === null ? '' : `<br><span class="error">${escapeHtml(m.error)}</span>`}</td>` +
        `<td><code>${escapeHtml(m.kind)}</code></td><td>${escapeHtml(m.to)}</td><td>${escapeHtml(m.subject)}</td>` +
        `<td>${m.orderId === null ? '–' : `<a href="/operator/mail?lang=${lang}&amp;order=${m.orderId}">${m.orderId}</a>`}</td></tr>`,
    );
    return operatorPage(
      reply,
      bad ? 400 : 200,
      lang,
      session,
      '/operator/mail',
      t.mail,
      `<form method="get" action="/operator/mail">${hidden('lang', lang)}` +
        `<label for="order">${t.orderFilter}</label><input id="order" name="order" inputmode="numeric" maxlength="15" value="${filtered ? escapeHtml(String(asked).slice(0, 15)) : ''}">` +
        `<button type="submit">${t.filter}</button></form>` +
        (bad ? `<p class="error" role="alert">${t.badOrder}</p>` : `<p class="muted">${t.newest(50)}</p>`) +
        (rows.length === 0
          ? `<p>${t.mailEmpty}</p>`
          : table([t.created, t.status, t.kind, t.to, t.subject, t.order], rows)),
    );
  });

  operatorGet(app, deps, '/operator/jobs', async (request, reply, session, lang) => {
    const t = TEXT[lang];
    const query = request.query as { done?: unknown; job?: unknown };
    const retried = query.done === 'retried' ? positiveId(query.job) : undefined;
    const rows = (await deps.operatorConsole.deadJobs()).map(
      (j) =>
        `<tr><td>${j.id}</td><td><code>${escapeHtml(j.name)}</code></td><td>${j.attempts}</td><td>${when(lang, j.updatedAt)}</td>` +
        `<td><code>${escapeHtml(j.lastError ?? '')}</code></td><td>` +
        form(
          session,
          lang,
          '/operator/jobs/retry',
          hidden('job', String(j.id)) +
            `<button type="submit" aria-label="${escapeHtml(`${t.retry} ${t.job} ${j.id}`)}">${t.retry}</button>`,
        ) +
        `</td></tr>`,
    );
    return operatorPage(
      reply,
      200,
      lang,
      session,
      '/operator/jobs',
      t.jobs,
      statusLine(retried === undefined ? undefined : t.retried(retried)) +
        `<p>${escapeHtml(t.jobsLead)}</p>` +
        (rows.length === 0
          ? `<p>${t.jobsEmpty}</p>`
          : table([t.job, t.kind, t.attempts, t.failedAt, t.lastError, t.action], rows)),
    );
  });

  operatorPost(app, deps, '/operator/jobs/retry', async (body, actor, lang) => {
    const id = positiveId(body.job);
    if (id === undefined) throw new CertdeskError('invalidInput', 'No job was named.');
    await deps.operatorConsole.retryJob(actor, id);
    return `/operator/jobs?lang=${lang}&done=retried&job=${id}`;
  });
}
