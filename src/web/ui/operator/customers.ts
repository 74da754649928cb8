import { CertdeskError, currencyDecimals, fromMinor, type Customer } from '../../../core/index.js';
import type { App } from '../../types.js';
import { escapeHtml, hidden, type Lang } from '../page.js';
import {
  field,
  form,
  operatorGet,
  operatorPage,
  operatorPost,
  positiveId,
  statusLine,
  when,
  type OperatorPageDeps,
} from './common.js';

// Customers: the list with credit and suspension, a form to create one (its ADMIN password and
// API client secret shown once), a credit-limit form and a suspend/unsuspend button per customer.

const TEXT = {
  en: {
    title: 'Customers',
    create: 'New customer',
    name: 'Name',
    email: 'Contact e-mail',
    currency: 'Currency (ISO 4217)',
    limit: 'Credit limit',
    country: 'Country (ISO 3166, two letters)',
    createButton: 'Create customer',
    list: 'All customers',
    id: 'ID',
    credit: 'Used / limit',
    state: 'State',
    actions: 'Actions',
    active: 'active',
    suspendedSince: 'suspended since',
    newLimit: (name: string) => `New credit limit of ${name}`,
    setLimit: 'Set limit',
    suspend: 'Suspend',
    unsuspend: 'Lift suspension',
    none: 'There are no customers yet.',
    created: 'Customer created',
    once: 'The password and the client secret are shown only now: hand them over safely.',
    username: 'ADMIN user',
    password: 'Password',
    done: {
      limit: 'The credit limit was changed.',
      suspended: 'The customer is suspended: its tokens and sign-ins are refused.',
      unsuspended: 'The suspension was lifted.',
    },
  },
  de: {
    title: 'Kunden',
    create: 'Neuer Kunde',
    name: 'Name',
    email: 'Kontakt-E-Mail',
    currency: 'Währung (ISO 4217)',
    limit: 'Kreditlimit',
    country: 'Land (ISO 3166, zwei Buchstaben)',
    createButton: 'Kunden anlegen',
    list: 'Alle Kunden',
    id: 'ID',
    credit: 'Genutzt / Limit',
    state: 'Zustand',
    actions: 'Aktionen',
    active: 'aktiv',
    suspendedSince: 'gesperrt seit',
    newLimit: (name: string) => `Neues Kreditlimit von ${name}`,
    setLimit: 'Limit setzen',
    suspend: 'Sperren',
    unsuspend: 'Sperre aufheben',
    none: 'Es gibt noch keine Kunden.',
    created: 'Kunde angelegt',
    once: 'Passwort und Client-Secret werden nur jetzt angezeigt: Übergeben Sie sie sicher.',
    username: 'ADMIN-Benutzer',
    password: 'Passwort',
    done: {
      limit: 'Das Kreditlimit wurde geändert.',
      suspended: 'Der Kunde ist gesperrt: Seine Tokens und Anmeldungen werden abgelehnt.',
      unsuspended: 'Die Sperre wurde aufgehoben.',
    },
  },
} as const;

const amount = (lang: Lang, minor: number, currency: string) =>
  `${fromMinor(minor, currency).toLocaleString(lang === 'de' ? 'de-DE' : 'en-GB', {
    minimumFractionDigits: currencyDecimals(currency),
  })} ${escapeHtml(currency)}`;

export function registerOperatorCustomers(app: App, deps: OperatorPageDeps): void {
  operatorGet(app, deps, '/operator/customers', async (request, reply, session, lang) => {
    const t = TEXT[lang];
    const done = (request.query as { done?: unknown }).done;
    const rows = await deps.operatorConsole.customers();
    const row = ({ customer: c, suspendedAt }: { customer: Customer; suspendedAt: number | null }) =>
      `<tr><td>${c.id}</td><td>${escapeHtml(c.name)}<br><span class="muted">${escapeHtml(c.email)}</span></td>` +
      `<td>${amount(lang, c.usedMinor, c.currency)} / ${amount(lang, c.creditLimitMinor, c.currency)}</td>` +
      `<td>${suspendedAt === null ? t.active : `<strong class="error">${t.suspendedSince}</strong> ${when(lang, suspendedAt)}`}</td><td>` +
      form(
        session,
        lang,
        '/operator/customers/credit-limit',
        hidden('customer', String(c.id)) +
          hidden('was', String(c.creditLimitMinor)) +
          `<input name="limit" inputmode="decimal" required maxlength="20" value="${fromMinor(c.creditLimitMinor, c.currency)}" aria-label="${escapeHtml(t.newLimit(c.name))}">` +
          `<button type="submit">${t.setLimit}</button>`,
      ) +
      form(
        session,
        lang,
        suspendedAt === null ? '/operator/customers/suspend' : '/operator/customers/unsuspend',
        hidden('customer', String(c.id)) +
          `<button type="submit" class="secondary">${suspendedAt === null ? t.suspend : t.unsuspend}</button>`,
      ) +
      `</td></tr>`;
    const createForm = form(
      session,
      lang,
      '/operator/customers',
      `<label for="c-name">${t.name}</label><input id="c-name" name="name" required maxlength="200">` +
        `<label for="c-email">${t.email}</label><input id="c-email" name="email" type="email" required maxlength="200">` +
        `<label for="c-currency">${t.currency}</label><input id="c-currency" name="currency" required maxlength="3" value="EUR">` +
        `<label for="c-limit">${t.limit}</label><input id="c-limit" name="limit" inputmode="decimal" required maxlength="20" value="0">` +
        `<label for="c-country">${t.country}</label><input id="c-country" name="country" maxlength="2" value="DE">` +
        `<p><button type="submit">${t.createButton}</button></p>`,
    );
    return operatorPage(
      reply,
      200,
      lang,
      session,
      '/operator/customers',
      t.title,
      statusLine(
        typeof done === 'string' && Object.hasOwn(t.done, done) ? t.done[done as keyof typeof t.done] : undefined,
      ) +
        `<h2>${t.list}</h2>` +
        (rows.length === 0
          ? `<p>${t.none}</p>`
          : `<table class="op"><thead><tr><th scope="col">${t.id}</th><th scope="col">${t.name}</th><th scope="col">${t.credit}</th>` +
            `<th scope="col">${t.state}</th><th scope="col">${t.actions}</th></tr></thead><tbody>${rows.map(row).join('')}</tbody></table>`) +
        `<h2>${t.create}</h2>${createForm}`,
    );
  });

  operatorPost(app, deps, '/operator/customers', async (body, actor, lang, _request, reply, session) => {
    const t = TEXT[lang];
    const created = await deps.operatorConsole.createCustomer(actor, {
      name: field(body, 'name', 200),
      email: field(body, 'email', 200),
      currency: field(body, 'currency', 3),
      creditLimit: field(body, 'limit', 20),
      country: field(body, 'country', 2),
    });
    const shown = [
      [t.id, String(created.customer.id)],
      [t.name, created.customer.name],
      [t.username, created.user.username],
      [t.password, created.password],
      ['client_id', created.application.clientId],
      ['client_secret', created.clientSecret],
    ];
    // The secrets are shown once, on this answer to the POST (never cached: page() sends no-store).
    return operatorPage(
      reply,
      201,
      lang,
      session,
      '/operator/customers',
      t.created,
      `<p>${t.once}</p><dl>${shown.map(([k, v]) => `<dt>${escapeHtml(k!)}</dt><dd><code>${escapeHtml(v!)}</code></dd>`).join('')}</dl>` +
        `<p><a href="/operator/customers?lang=${lang}">${t.title}</a></p>`,
    );
  });

  const customerOf = (body: Record<string, unknown>) => {
    const id = positiveId(body.customer);
    if (id === undefined) throw new CertdeskError('invalidInput', 'No customer was named.');
    return id;
  };

  operatorPost(app, deps, '/operator/customers/credit-limit', async (body, actor, lang) => {
    const was = /^\d{1,15}$/.test(field(body, 'was', 20)) ? Number(field(body, 'was', 20)) : undefined;
    if (was === undefined) throw new CertdeskError('invalidInput', 'The form is incomplete: reload the page.');
    await deps.operatorConsole.setCreditLimit(actor, customerOf(body), was, field(body, 'limit', 40));
    return `/operator/customers?lang=${lang}&done=limit`;
  });

  for (const on of [true, false]) {
    operatorPost(
      app,
      deps,
      on ? '/operator/customers/suspend' : '/operator/customers/unsuspend',
      async (body, actor, lang) => {
        await deps.operatorConsole.setSuspended(actor, customerOf(body), on);
        return `/operator/customers?lang=${lang}&done=${on ? 'suspended' : 'unsuspended'}`;
      },
    );
  }
}
