import type { FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import { currencyDecimals } from '../../../core/index.js';
import { escapeHtml, hidden } from '../page.js';
import { consolePage, failure, field, notice, type Console, type consoleRoutes } from './context.js';
import { orderTable } from './orders.js';

// The dashboard and ordering: product → price (GET /Quote) → a CSR pasted, or a key and CSR made
// in the browser (/ui/console.js with WebCrypto; the key never leaves it) → the validation method
// → POST /Order → the order's page, which shows exactly what to publish.

async function dashboard(c: Console, reply: FastifyReply): Promise<FastifyReply> {
  const t = c.t;
  let body = notice(c);
  if (c.may('limit')) {
    const [limit, profile] = await Promise.all([c.api('GET', '/Limit'), c.api('GET', '/Profile')]);
    if (limit.ok) {
      const { Limit, Used } = limit.body.LimitInfo as { Limit: number; Used: number };
      const code = String(profile.body.Currency ?? '');
      const currency = escapeHtml(code);
      const digits = currencyDecimals(code);
      const money = (n: number) =>
        `${new Intl.NumberFormat(c.lang === 'de' ? 'de-DE' : 'en-GB', { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(n)} ${currency}`;
      body +=
        `<h2>${t.credit}</h2><dl class="facts"><dt>${t.limit}</dt><dd>${money(Limit)}</dd>` +
        `<dt>${t.used}</dt><dd>${money(Used)}</dd><dt>${t.left}</dt><dd>${money(Limit - Used)}</dd></dl>`;
    }
  }
  if (c.may('orders')) {
    const [expiring, waiting] = await Promise.all([
      c.api(
        'GET',
        '/Orders?ExpiresWithinDays=30&OrderBy=EndDate&OrderDir=ASC&ItemsPerPage=10&includeOrderParameters=true',
      ),
      c.api('GET', '/Orders?Status=PENDING&OrderBy=ID&OrderDir=DESC&ItemsPerPage=10&includeOrderParameters=true'),
    ]);
    body +=
      `<h2>${t.expiringSoon}</h2>` +
      (expiring.ok ? orderTable(c, expiring.body.OrderInfos) : failure(expiring.message));
    body += `<h2>${t.waiting}</h2>` + (waiting.ok ? orderTable(c, waiting.body.OrderInfos) : failure(waiting.message));
  }
  return consolePage(reply, c, 200, t.dashboard, body);
}

interface OrderForm {
  /** The form's PartnerOrderID: a double click or a resent form places one order, not two. */
  partner: string;
  product: string;
  validity: string;
  csr: string;
  method: string;
  approver: string;
  firstName: string;
  lastName: string;
  email: string;
  phone: string;
}

function formOf(c: Console): OrderForm {
  const source =
    c.request.method === 'POST'
      ? (c.request.body as Record<string, unknown>)
      : (c.request.query as Record<string, unknown>);
  const get = (k: string) => (typeof source?.[k] === 'string' ? (source[k] as string).trim() : '');
  return {
    partner: /^web-[A-Za-z0-9_-]{16}$/.test(get('partner')) ? get('partner') : newFormId(),
    product: get('product'),
    validity: get('validity') || '12',
    csr: get('csr'),
    method: get('method') || 'DNS',
    approver: get('approver'),
    firstName: get('firstName') || (c.user.fullName.split(' ')[0] ?? ''),
    lastName: get('lastName') || c.user.fullName.split(' ').slice(1).join(' '),
    email: get('email') || c.user.email,
    phone: get('phone') || (c.user.mobile ?? ''),
  };
}

async function orderForm(c: Console, reply: FastifyReply, status = 200, message = ''): Promise<FastifyReply> {
  const t = c.t;
  if (!c.may('orders', true)) return consolePage(reply, c, 403, t.newOrder, failure(t.notAllowed));
  const f = formOf(c);
  const products = await c.api('GET', '/Products');
  const codes: string[] = products.ok ? products.body.Products : [];
  let quote = '';
  if (f.product !== '' && codes.includes(f.product)) {
    const q = await c.api(
      'GET',
      `/Quote?${new URLSearchParams({ ProductCode: f.product, ValidityPeriod: f.validity, ServerCount: '1', SubjectAltNameCount: '0' })}`,
    );
    quote = q.ok
      ? `<p class="ok" role="status">${t.price}: <strong>${escapeHtml(String(q.body.Price))} ${escapeHtml(String(q.body.Currency))}</strong></p>`
      : failure(q.message);
  }
  const input = (id: keyof OrderForm, label: string, attrs = '') =>
    `<label for="${id}">${label}</label><input id="${id}" name="${id}" value="${escapeHtml(f[id])}" ${attrs}>`;
  const option = (value: string, label: string, current: string) =>
    `<option value="${escapeHtml(value)}"${value === current ? ' selected' : ''}>${escapeHtml(label)}</option>`;
  const body =
    (message === '' ? '' : failure(message)) +
    `<form method="post" action="${c.href('/order/new')}">${c.csrfField()}${hidden('partner', f.partner)}` +
    `<label for="product">${t.product}</label><select id="product" name="product" required>` +
    codes.map((code) => option(code, code, f.product)).join('') +
    `</select>` +
    `<label for="validity">${t.validity}</label><select id="validity" name="validity">` +
    ['12', '24'].map((v) => option(v, v, f.validity)).join('') +
    `</select>` +
    `<p><button type="submit" class="secondary" name="step" value="quote" formnovalidate>${t.quote}</button></p>${quote}` +
    `<label for="names">${t.namesForCsr}</label><input id="names" autocomplete="off">` +
    `<p><button type="button" class="secondary" id="make-csr" data-key-made="${t.keyMade}">${t.makeCsr}</button> ` +
    `<a id="key-link" hidden>${t.keyLink}</a></p><p id="csr-note" role="status"></p>` +
    `<label for="csr">${t.csr}</label><textarea id="csr" name="csr" maxlength="20000">${escapeHtml(f.csr)}</textarea>` +
    `<label for="method">${t.dvMethod}</label><select id="method" name="method">` +
    option('DNS', t.dns, f.method) +
    option('FILE', t.fileMethod, f.method) +
    option('EMAIL', t.email, f.method) +
    `</select>` +
    input('approver', t.approver, 'type="email" maxlength="254" autocomplete="off"') +
    `<fieldset><legend>${t.contact}</legend>` +
    input('firstName', t.firstName, 'required maxlength="100" autocomplete="given-name"') +
    input('lastName', t.lastName, 'required maxlength="100" autocomplete="family-name"') +
    input('email', t.emailAddress, 'type="email" required maxlength="254" autocomplete="email"') +
    input('phone', t.phone, 'required maxlength="40" autocomplete="tel"') +
    `</fieldset><p><button type="submit">${t.placeOrder}</button></p></form>`;
  return consolePage(reply, c, status, t.newOrder, body, { scripts: ['console.js'] });
}

async function placeOrder(c: Console, reply: FastifyReply): Promise<FastifyReply> {
  // "Show the price" sends the form too (a GET would put the form's CSRF token into a URL).
  if (field(c.request, 'step') === 'quote') return orderForm(c, reply);
  const contact = {
    FirstName: field(c.request, 'firstName'),
    LastName: field(c.request, 'lastName'),
    Email: field(c.request, 'email'),
    Phone: field(c.request, 'phone'),
  };
  const method = field(c.request, 'method');
  const approver = field(c.request, 'approver');
  const res = await c.api('POST', '/Order', {
    OrderParameters: {
      ...(/^web-[A-Za-z0-9_-]{16}$/.test(field(c.request, 'partner'))
        ? { PartnerOrderID: field(c.request, 'partner') }
        : {}),
      ProductCode: field(c.request, 'product'),
      ValidityPeriod: Number(field(c.request, 'validity')),
      CSR: field(c.request, 'csr'),
      DVAuthMethod: method,
      ...(method === 'EMAIL' && approver !== '' ? { ApproverEmail: approver } : {}),
    },
    AdminContact: contact,
    TechContact: contact,
  });
  if (!res.ok) return orderForm(c, reply, res.status >= 500 ? 502 : 400, res.message);
  return reply.redirect(`${c.href(`/orders/${Number(res.body.ServiceOrderID)}`)}&done=placed`, 303);
}

export function registerOrdering(routes: ReturnType<typeof consoleRoutes>): void {
  routes.get('/', dashboard);
  routes.get('/order/new', (c, reply) => orderForm(c, reply));
  routes.post('/order/new', placeOrder);
}

/** A form's own PartnerOrderID (`web-` and 96 random bits). */
export const newFormId = () => `web-${randomBytes(12).toString('base64url')}`;
