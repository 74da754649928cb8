import type { FastifyReply } from 'fastify';
import { escapeHtml, hidden } from '../page.js';
import { newFormId } from './ordering.js';
import { consolePage, failure, field, notice, redirectDone, type Console, type consoleRoutes } from './context.js';

// Vouchers: create (POST /Voucher), list (GET /Vouchers), void (DELETE /Voucher/{code}), and the
// redemption link to hand on. The link carries the code after `#`, so it never reaches a server log.

async function voucherScreen(c: Console, reply: FastifyReply, status = 200, top = ''): Promise<FastifyReply> {
  const t = c.t;
  const [list, products] = await Promise.all([c.api('GET', '/Vouchers'), c.api('GET', '/Products')]);
  if (!list.ok) return consolePage(reply, c, list.status, t.vouchers, failure(list.message));
  const writes = c.may('vouchers', true);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const vouchers: any[] = list.body.Vouchers ?? [];
  let body = top + notice(c);
  if (writes) {
    const codes: string[] = products.ok ? products.body.Products : [];
    body +=
      `<h2>${t.newVoucher}</h2><form method="post" action="${c.href('/vouchers')}">${c.csrfField()}${hidden('partner', newFormId())}` +
      `<label for="product">${t.product}</label><select id="product" name="product">${codes.map((p) => `<option>${escapeHtml(p)}</option>`).join('')}</select>` +
      `<label for="validity">${t.validity}</label><select id="validity" name="validity"><option>12</option><option>24</option></select>` +
      `<label for="sans">${t.sans}</label><input id="sans" name="sans" type="number" min="0" max="250" value="0">` +
      `<p><button type="submit">${t.newVoucher}</button></p></form>`;
  }
  body += `<h2>${t.vouchers}</h2>`;
  body +=
    vouchers.length === 0
      ? `<p>${t.none}</p>`
      : `<table><thead><tr><th scope="col">${t.code}</th><th scope="col">${t.product}</th><th scope="col">${t.price}</th>` +
        `<th scope="col">${t.created}</th><th scope="col">${t.redeemed}</th><th scope="col">${t.link}</th></tr></thead><tbody>` +
        vouchers
          .map((v) => {
            const code = String(v.VoucherCode);
            const masked = code.includes('*');
            const link = `${c.origin}/redeem#code=${encodeURIComponent(code)}`;
            const order = v.RedeemInfo?.ServiceOrderID;
            return (
              `<tr><td><code>${escapeHtml(code)}</code></td><td>${escapeHtml(String(v.OrderParameters?.ProductCode ?? ''))}</td>` +
              `<td>${escapeHtml(String(v.OrderParameters?.Price ?? ''))} ${escapeHtml(String(v.OrderParameters?.Currency ?? ''))}</td>` +
              `<td>${c.date(v.CreationDate)}</td>` +
              `<td>${v.Redeemed === true ? `${t.yes}${order === undefined ? '' : ` (<a href="${c.href(`/orders/${Number(order)}`)}">${Number(order)}</a>)`}` : t.no}</td>` +
              `<td>${
                v.Redeemed === true || masked
                  ? ''
                  : `<button type="button" class="secondary copy" data-copy="${escapeHtml(link)}" data-copied="${t.copied}" aria-label="${t.copy}: ${t.link} ${escapeHtml(code)}">${t.copy}</button>` +
                    (writes
                      ? ` <form method="post" action="${c.href('/vouchers/void')}" class="inline">${c.csrfField()}<input type="hidden" name="code" value="${escapeHtml(code)}">` +
                        `<button type="submit" class="danger" aria-label="${t.voidIt} ${escapeHtml(code)}">${t.voidIt}</button></form>`
                      : '')
              }</td></tr>`
            );
          })
          .join('') +
        `</tbody></table>`;
  return consolePage(reply, c, status, t.vouchers, body, { scripts: ['console.js'] });
}

export function registerVoucherScreens(routes: ReturnType<typeof consoleRoutes>): void {
  routes.get('/vouchers', (c, reply) => voucherScreen(c, reply));
  routes.post('/vouchers', async (c, reply) => {
    const res = await c.api('POST', '/Voucher', {
      OrderParameters: {
        // The form's own PartnerOrderID: a double click makes one voucher, not two.
        ...(/^web-[A-Za-z0-9_-]{16}$/.test(field(c.request, 'partner'))
          ? { PartnerOrderID: field(c.request, 'partner') }
          : {}),
        ProductCode: field(c.request, 'product'),
        ValidityPeriod: Number(field(c.request, 'validity')),
        SubjectAltNameCount: /^[0-9]{1,4}$/.test(field(c.request, 'sans')) ? Number(field(c.request, 'sans')) : -1,
        ServerCount: 1,
      },
    });
    if (!res.ok) return voucherScreen(c, reply, 400, failure(res.message));
    return redirectDone(reply, c, '/vouchers', 'created');
  });
  routes.post('/vouchers/void', async (c, reply) => {
    const res = await c.api('DELETE', `/Voucher/${encodeURIComponent(field(c.request, 'code'))}`);
    if (!res.ok) return voucherScreen(c, reply, 400, failure(res.message));
    return redirectDone(reply, c, '/vouchers', 'voided');
  });
}
