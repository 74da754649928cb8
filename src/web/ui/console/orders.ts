import type { FastifyReply } from 'fastify';
import { escapeHtml } from '../page.js';
import { consolePage, failure, field, notice, redirectDone, type Console, type consoleRoutes } from './context.js';

// The order list (GET /Orders: its filters, a search by common name, paging that never counts
// more than it shows) and the order page: status timeline, each name's validation with the exact
// record or file to publish and "check now", downloads, cancel (refund rule first), revoke, reissue.

const STATUSES = ['PENDING', 'COMPLETE', 'REISSUE', 'CANCELLED', 'REVOKED', 'FAILED'] as const;
const PER_PAGE = [25, 50, 100] as const;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type OrderInfo = any;

const statusText = (o: OrderInfo) =>
  `${escapeHtml(String(o.OrderStatus?.MajorStatus ?? ''))} / ${escapeHtml(String(o.OrderStatus?.MinorStatus ?? ''))}`;

/** A table of orders, each linked to its page. */
export function orderTable(c: Console, infos: readonly OrderInfo[]): string {
  const t = c.t;
  if (infos.length === 0) return `<p>${t.none}</p>`;
  return (
    `<table><thead><tr><th scope="col">${t.id}</th><th scope="col">${t.commonName}</th><th scope="col">${t.product}</th>` +
    `<th scope="col">${t.status}</th><th scope="col">${t.ordered}</th><th scope="col">${t.expires}</th></tr></thead><tbody>` +
    infos
      .map(
        (o) =>
          `<tr><td><a href="${c.href(`/orders/${Number(o.ServiceOrderID)}`)}">${Number(o.ServiceOrderID)}</a></td>` +
          `<td>${escapeHtml(String(o.CommonName ?? ''))}</td><td>${escapeHtml(String(o.OrderParameters?.ProductCode ?? ''))}</td>` +
          `<td>${statusText(o)}</td><td>${c.date(o.OrderStatus?.OrderDate)}</td><td>${c.date(o.OrderStatus?.EndDate)}</td></tr>`,
      )
      .join('') +
    `</tbody></table>`
  );
}

function listQuery(c: Console) {
  const q = c.request.query as Record<string, unknown>;
  const str = (k: string) => (typeof q[k] === 'string' ? (q[k] as string) : '');
  const status = STATUSES.find((s) => s === str('status')) ?? '';
  const perPage = PER_PAGE.find((n) => String(n) === str('per')) ?? 25;
  const page = Math.min(Math.max(1, Number.parseInt(str('page'), 10) || 1), 1_000_000);
  const name = str('name').slice(0, 200);
  return { status, perPage, page, name };
}

async function listScreen(c: Console, reply: FastifyReply): Promise<FastifyReply> {
  const t = c.t;
  const q = listQuery(c);
  const params = new URLSearchParams({
    Page: String(q.page),
    ItemsPerPage: String(q.perPage),
    OrderBy: 'ID',
    OrderDir: 'DESC',
    includeOrderParameters: 'true',
  });
  if (q.status !== '') params.set('Status', q.status);
  // A search for a part of the name: the API's pattern, `%` around what was typed.
  if (q.name !== '') params.set('CommonName', `%${q.name.replace(/%/g, '')}%`);
  const res = await c.api('GET', `/Orders?${params}`);
  const infos: OrderInfo[] = res.ok ? res.body.OrderInfos : [];
  const total = res.ok ? Number(res.body._meta?.ItemsAvailable ?? 0) : 0;
  const pages = Math.max(1, Math.ceil(total / q.perPage));
  const link = (page: number) =>
    c.href(
      `/orders?${new URLSearchParams({ status: q.status, name: q.name, per: String(q.perPage), page: String(page) })}`,
    );
  const form =
    `<form method="get" action="/orders" class="filters"><input type="hidden" name="lang" value="${c.lang}">` +
    `<label for="f-status">${t.status}</label><select id="f-status" name="status"><option value="">${t.anyStatus}</option>` +
    STATUSES.map((s) => `<option${s === q.status ? ' selected' : ''}>${s}</option>`).join('') +
    `</select><label for="f-name">${t.search}</label><input id="f-name" name="name" maxlength="200" value="${escapeHtml(q.name)}">` +
    `<label for="f-per">${t.perPage}</label><select id="f-per" name="per">` +
    PER_PAGE.map((n) => `<option${n === q.perPage ? ' selected' : ''}>${n}</option>`).join('') +
    `</select><button type="submit">${t.filter}</button></form>`;
  const pager =
    `<nav aria-label="${t.page}" class="pager">` +
    (q.page > 1 ? `<a href="${link(q.page - 1)}" rel="prev">${t.previous}</a> ` : '') +
    `<span>${t.page} ${q.page} ${t.ofAbout} ${pages} (${total})</span>` +
    (q.page < pages ? ` <a href="${link(q.page + 1)}" rel="next">${t.next}</a>` : '') +
    `</nav>`;
  return consolePage(
    reply,
    c,
    res.ok ? 200 : res.status,
    t.orders,
    form + (res.ok ? '' : failure(res.message)) + orderTable(c, infos) + pager,
  );
}

/** Data for the DCV box: what to publish, from the order's own details. */
function publishBox(c: Console, o: OrderInfo): string {
  const t = c.t;
  const dns = o.OrderParameters?.DNSAuthDetails;
  const file = o.OrderParameters?.FileAuthDetails;
  const row = (label: string, value: string) =>
    `<tr><th scope="row">${label}</th><td><code>${escapeHtml(value)}</code></td>` +
    `<td><button type="button" class="secondary copy" data-copy="${escapeHtml(value)}" data-copied="${t.copied}" aria-label="${t.copy}: ${label}">${t.copy}</button></td></tr>`;
  if (dns?.DNSValue !== undefined)
    return (
      `<h3>${t.publish}</h3><table class="publish"><tbody>` +
      row(t.record, String(dns.PointerType)) +
      row(t.at, `${String(dns.PointerType) === 'TXT' ? '' : ''}${String(dns.DNSEntry)}`) +
      row(t.value, String(dns.DNSValue)) +
      `</tbody></table>`
    );
  if (file?.FileContents !== undefined)
    return (
      `<h3>${t.publish}</h3><table class="publish"><tbody>` +
      row(t.file, `${String(file.FilePath)}${String(file.FileName)}`) +
      row(t.contents, String(file.FileContents)) +
      `</tbody></table>`
    );
  return '';
}

async function orderScreen(c: Console, reply: FastifyReply, extra = '', status = 200): Promise<FastifyReply> {
  const t = c.t;
  const id = Number((c.request.params as { id: string }).id);
  const res = await c.api(
    'GET',
    `/Order/${id}?includeDCVStatus=true&includeOrderParameters=true&includeFulfillment=true&includeBillingDetails=true`,
  );
  if (!res.ok) return consolePage(reply, c, res.status, `${t.id} ${id}`, failure(res.message));
  const o: OrderInfo = res.body.OrderInfo;
  const s = o.OrderStatus ?? {};
  const major = String(s.MajorStatus ?? '');
  const writes = c.may('orders', true);
  const form = (action: string, inner: string, label: string, cls = '') =>
    `<form method="post" action="${c.href(`/orders/${id}/${action}`)}">${c.csrfField()}${inner}<button type="submit"${cls}>${label}</button></form>`;
  const names: OrderInfo[] = Array.isArray(o.DCVStatus) ? o.DCVStatus : [];
  const timeline = [
    [t.orderedAt, s.OrderDate],
    ...names
      .filter((n) => n.ValidatedAt !== undefined)
      .map((n) => [`${t.validatedAt}: ${escapeHtml(String(n.Domain))}`, n.ValidatedAt]),
    [t.issuedAt, s.StartDate],
    [t.endsAt, s.EndDate],
    [t.modifiedAt, s.UpdateDate],
  ].filter(([, at]) => at !== undefined && at !== null && at !== '');
  let body =
    extra +
    notice(c) +
    `<p><strong>${escapeHtml(String(o.CommonName ?? ''))}</strong> · ${escapeHtml(String(o.OrderParameters?.ProductCode ?? ''))} · ` +
    `<span id="status">${statusText(o)}</span></p>` +
    `<h2>${t.timeline}</h2><ol class="timeline">${timeline.map(([label, at]) => `<li>${label}: ${c.date(at)}</li>`).join('')}</ol>`;
  if (names.length > 0) {
    body +=
      `<h2>${t.validation}</h2><table><thead><tr><th scope="col">${t.name}</th><th scope="col">${t.method}</th>` +
      `<th scope="col">${t.result}</th><th scope="col">${t.lastCheck}</th></tr></thead><tbody>` +
      names
        .map(
          (n) =>
            `<tr><td>${escapeHtml(String(n.Domain))}</td><td>${escapeHtml(String(n.Method))}</td>` +
            `<td>${escapeHtml(String(n.Status))}${n.Problem === undefined ? '' : `: ${escapeHtml(String(n.Problem))}`}</td>` +
            `<td>${c.date(n.LastCheck)}</td></tr>`,
        )
        .join('') +
      `</tbody></table>`;
    if ((major === 'PENDING' || major === 'REISSUE') && names.some((n) => n.Status !== 'VALIDATED')) {
      body += publishBox(c, o);
      if (writes) body += form('check', '', t.checkNow);
    }
  }
  const f = o.Fulfillment;
  if (f?.Certificate !== undefined) {
    body +=
      `<h2>${t.downloads}</h2><ul>` +
      `<li><a href="/orders/${id}/certificate.pem" download>${t.certificate}</a></li>` +
      `<li><a href="/orders/${id}/chain.pem" download>${t.chain}</a></li>` +
      `<li><a href="/orders/${id}/certificate.p7b" download>${t.pkcs7}</a></li></ul>`;
  }
  if (writes && major !== 'CANCELLED' && major !== 'REVOKED' && major !== 'FAILED') {
    // Before issuance cancelling is free; after it, the API decides by the first issuance (which
    // a reissue's StartDate does not show), so the rule is stated rather than guessed.
    const free = s.StartDate === undefined;
    body +=
      `<h2>${t.cancel}</h2><p>${free ? t.cancelFree : t.cancelRule}</p>` +
      form('cancel', '', t.cancel, ' class="danger"');
  }
  if (writes && f?.Certificate !== undefined && major === 'COMPLETE') {
    body +=
      `<h2>${t.reissue}</h2>` +
      form(
        'reissue',
        `<label for="names">${t.namesForCsr}</label><input id="names" value="${escapeHtml(String(o.CommonName ?? ''))}">` +
          `<p><button type="button" class="secondary" id="make-csr" data-key-made="${t.keyMade}">${t.makeCsr}</button> <a id="key-link" hidden>${t.keyLink}</a></p>` +
          `<p id="csr-note" role="status"></p>` +
          `<label for="csr">${t.csr}</label><textarea id="csr" name="csr" required maxlength="20000"></textarea>`,
        t.reissue,
      ) +
      `<h2>${t.revoke}</h2>` +
      form(
        'revoke',
        `<label for="reason">${t.reason}</label><select id="reason" name="reason">` +
          ['keyCompromise', 'superseded', 'cessationOfOperation', 'affiliationChanged', 'unspecified']
            .map((r) => `<option>${r}</option>`)
            .join('') +
          `</select>`,
        t.revoke,
        ' class="danger"',
      );
  }
  return consolePage(reply, c, status, `${t.id} ${id}`, body, { scripts: ['console.js'] });
}

const DOWNLOADS: Record<string, { member: string; type: string }> = {
  'certificate.pem': { member: 'Certificate', type: 'application/x-pem-file' },
  'chain.pem': { member: 'Intermediate', type: 'application/x-pem-file' },
  'certificate.p7b': { member: 'Certificate_PKCS7', type: 'application/x-pkcs7-certificates' },
};

export function registerOrderScreens(routes: ReturnType<typeof consoleRoutes>): void {
  routes.get('/orders', listScreen);
  routes.get('/orders/:id', async (c, reply) => {
    if (!/^[0-9]{1,10}$/.test((c.request.params as { id: string }).id))
      return consolePage(reply, c, 404, c.t.orders, failure('No such order.'));
    return orderScreen(c, reply);
  });
  routes.get('/orders/:id/:file', async (c, reply) => {
    const { id, file } = c.request.params as { id: string; file: string };
    const what = DOWNLOADS[file];
    if (what === undefined || !/^[0-9]{1,10}$/.test(id))
      return consolePage(reply, c, 404, c.t.orders, failure('Not found.'));
    const res = await c.api('GET', `/Order/${id}?includeFulfillment=true`);
    const value = res.ok ? res.body.OrderInfo?.Fulfillment?.[what.member] : undefined;
    if (typeof value !== 'string')
      return consolePage(reply, c, res.ok ? 404 : res.status, c.t.orders, failure(res.message || 'Not issued.'));
    const body = what.member === 'Certificate_PKCS7' ? pkcs7Pem(value) : value;
    return reply
      .type(what.type)
      .header('content-disposition', `attachment; filename="order-${id}-${file}"`)
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .send(body.endsWith('\n') ? body : `${body}\n`);
  });
  const action =
    (
      run: (c: Console, id: string) => Promise<{ ok: boolean; status: number; message: string }>,
      done: 'checked' | 'cancelled' | 'revoked' | 'reissued',
    ) =>
    async (c: Console, reply: FastifyReply) => {
      const id = (c.request.params as { id: string }).id;
      if (!/^[0-9]{1,10}$/.test(id)) return consolePage(reply, c, 404, c.t.orders, failure('No such order.'));
      const res = await run(c, id);
      if (res.ok) return redirectDone(reply, c, `/orders/${id}`, done);
      return orderScreen(c, reply, failure(res.message), res.status >= 500 ? 502 : res.status);
    };
  routes.post(
    '/orders/:id/check',
    action((c, id) => c.api('POST', `/CheckDCV/${id}`), 'checked'),
  );
  routes.post(
    '/orders/:id/cancel',
    action((c, id) => c.api('DELETE', `/Order/${id}`), 'cancelled'),
  );
  routes.post(
    '/orders/:id/reissue',
    action(
      (c, id) =>
        c.api('POST', '/Reissue', { ServiceOrderID: Number(id), OrderParameters: { CSR: field(c.request, 'csr') } }),
      'reissued',
    ),
  );
  routes.post(
    '/orders/:id/revoke',
    action(async (c, id) => {
      const current = await c.api('GET', `/Order/${id}?includeFulfillment=true`);
      const certificate = current.body?.OrderInfo?.Fulfillment?.Certificate;
      if (typeof certificate !== 'string')
        return {
          ok: false,
          status: current.ok ? 409 : current.status,
          message: current.message || 'The order has no certificate.',
        };
      return c.api('DELETE', `/Revoke/${id}`, {
        RevokeReason: field(c.request, 'reason') || 'unspecified',
        Certificate: certificate,
      });
    }, 'revoked'),
  );
}

/** The API's PKCS#7 is base64 DER; the download is PEM, as openssl and servers read it. */
function pkcs7Pem(value: string): string {
  if (value.includes('-----BEGIN')) return value;
  const b64 = value.replace(/\s+/g, '');
  return `-----BEGIN PKCS7-----\n${b64.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END PKCS7-----\n`;
}
