import { CertdeskError, type Contact, type Order, type OrderName, type VettedData } from '../../../core/index.js';
import { BUSINESS_CATEGORIES } from '../../../ra/orders/vetting.js';
import type { OperatorSession } from '../../../storage/index.js';
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

// The vetting queue of OV and EV orders: what the customer sent about its organization, an
// approve form (EV: the registration data Vetting.approve needs) and a reject form with a reason.

const TEXT = {
  en: {
    title: 'Vetting queue',
    empty: 'No order is waiting for vetting.',
    order: (id: number) => `Order ${id}`,
    customer: 'Customer',
    ordered: 'Ordered',
    names: 'Names',
    organization: 'Organization',
    address: 'Address',
    phone: 'Phone',
    admin: 'Administrative contact',
    tech: 'Technical contact',
    category: 'Business category',
    registration: 'Registration number',
    jurisdictionCountry: 'Jurisdiction: country (two letters)',
    jurisdictionState: 'Jurisdiction: state or province (where it applies)',
    jurisdictionLocality: 'Jurisdiction: locality (where it applies)',
    approve: 'Approve and issue',
    reason: 'Reason for rejecting (the customer is told)',
    reject: 'Reject',
    done: {
      approved: (id: number) => `Order ${id} was approved and left the queue.`,
      rejected: (id: number) => `Order ${id} was rejected and refunded.`,
    },
  },
  de: {
    title: 'Prüfwarteschlange',
    empty: 'Keine Bestellung wartet auf Prüfung.',
    order: (id: number) => `Bestellung ${id}`,
    customer: 'Kunde',
    ordered: 'Bestellt',
    names: 'Namen',
    organization: 'Organisation',
    address: 'Anschrift',
    phone: 'Telefon',
    admin: 'Administrativer Kontakt',
    tech: 'Technischer Kontakt',
    category: 'Unternehmenskategorie',
    registration: 'Registernummer',
    jurisdictionCountry: 'Gerichtsstand: Land (zwei Buchstaben)',
    jurisdictionState: 'Gerichtsstand: Bundesland (falls zutreffend)',
    jurisdictionLocality: 'Gerichtsstand: Ort (falls zutreffend)',
    approve: 'Freigeben und ausstellen',
    reason: 'Grund der Ablehnung (wird dem Kunden mitgeteilt)',
    reject: 'Ablehnen',
    done: {
      approved: (id: number) => `Bestellung ${id} wurde freigegeben und hat die Warteschlange verlassen.`,
      rejected: (id: number) => `Bestellung ${id} wurde abgelehnt und erstattet.`,
    },
  },
} as const;

const text = (v: string | undefined) => escapeHtml(v ?? '');
const contact = (c: Contact | undefined) =>
  c === undefined
    ? '–'
    : [[c.Title, c.FirstName, c.LastName].filter(Boolean).join(' '), c.Email, c.Phone, c.OrganizationName]
        .filter((x) => x !== undefined && x !== '')
        .map((x) => text(x))
        .join('<br>');

function entry(lang: Lang, session: OperatorSession, order: Order, names: OrderName[]): string {
  const t = TEXT[lang];
  const org = order.organization ?? {};
  const a = org.OrganizationAddress ?? {};
  const id = order.id;
  const details: [string, string][] = [
    [t.customer, String(order.customerId)],
    [t.ordered, when(lang, order.orderDate)],
    [t.names, `<ul>${names.map((n) => `<li><code>${text(n.name)}</code></li>`).join('')}</ul>`],
    [t.organization, `<strong>${text(org.OrganizationName)}</strong>`],
    [
      t.address,
      [a.AddressLine1, [a.PostalCode, a.City].filter(Boolean).join(' '), a.Region, a.Country]
        .filter((x) => x !== undefined && x !== '')
        .map((x) => text(x))
        .join('<br>'),
    ],
    [t.phone, text(a.Phone)],
    [t.admin, contact(order.contacts.AdminContact)],
    [t.tech, contact(order.contacts.TechContact)],
  ];
  const input = (name: string, label: string, extra = '') =>
    `<label for="${name}-${id}">${label}</label><input id="${name}-${id}" name="${name}" maxlength="64"${extra}>`;
  const ev =
    order.validationLevel !== 'EV'
      ? ''
      : `<label for="category-${id}">${t.category}</label><select id="category-${id}" name="category" required>` +
        BUSINESS_CATEGORIES.map((c) => `<option>${escapeHtml(c)}</option>`).join('') +
        `</select>` +
        input('registration', t.registration, ' required') +
        input('country', t.jurisdictionCountry, ' required pattern="[A-Za-z]{2}"') +
        input('state', t.jurisdictionState) +
        input('locality', t.jurisdictionLocality);
  return (
    `<section class="box" aria-labelledby="order-${id}"><h2 id="order-${id}">${t.order(id)} · ${text(order.productCode)} (${text(order.validationLevel ?? '')})</h2>` +
    `<dl>${details.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('')}</dl>` +
    form(
      session,
      lang,
      '/operator/vetting/approve',
      hidden('order', String(id)) + ev + `<button type="submit">${t.approve}</button>`,
    ) +
    form(
      session,
      lang,
      '/operator/vetting/reject',
      hidden('order', String(id)) +
        `<label for="reason-${id}">${t.reason}</label><textarea id="reason-${id}" name="reason" required maxlength="500" rows="2"></textarea>` +
        `<button type="submit" class="secondary">${t.reject}</button>`,
    ) +
    `</section>`
  );
}

export function registerOperatorVetting(app: App, deps: OperatorPageDeps): void {
  operatorGet(app, deps, '/operator/vetting', async (request, reply, session, lang) => {
    const t = TEXT[lang];
    const query = request.query as { done?: unknown; order?: unknown };
    const orderId = positiveId(query.order);
    const done =
      orderId !== undefined && (query.done === 'approved' || query.done === 'rejected')
        ? t.done[query.done](orderId)
        : undefined;
    const queue = await deps.operatorConsole.vettingQueue();
    return operatorPage(
      reply,
      200,
      lang,
      session,
      '/operator/vetting',
      t.title,
      statusLine(done) +
        (queue.length === 0 ? `<p>${t.empty}</p>` : queue.map((q) => entry(lang, session, q.order, q.names)).join('')),
    );
  });

  const orderOf = (body: Record<string, unknown>) => {
    const id = positiveId(body.order);
    if (id === undefined) throw new CertdeskError('invalidInput', 'No order was named.');
    return id;
  };

  operatorPost(app, deps, '/operator/vetting/approve', async (body, actor, lang) => {
    const id = orderOf(body);
    const vetted: Record<string, string> = {};
    for (const [name, key] of [
      ['category', 'BusinessCategory'],
      ['registration', 'RegistrationNumber'],
      ['country', 'JurisdictionCountry'],
      ['state', 'JurisdictionState'],
      ['locality', 'JurisdictionLocality'],
    ] as const) {
      const value = field(body, name, 64).trim();
      if (value !== '') vetted[key] = key === 'JurisdictionCountry' ? value.toUpperCase() : value;
    }
    await deps.operatorConsole.approve(actor, id, vetted as VettedData);
    return `/operator/vetting?lang=${lang}&done=approved&order=${id}`;
  });

  operatorPost(app, deps, '/operator/vetting/reject', async (body, actor, lang) => {
    const id = orderOf(body);
    await deps.operatorConsole.reject(actor, id, field(body, 'reason', 500));
    return `/operator/vetting?lang=${lang}&done=rejected&order=${id}`;
  });
}
