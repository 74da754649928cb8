import type { FastifyReply } from 'fastify';
import type { ApprovalView, EmailApprovals } from '../../ra/email-approval.js';
import type { App } from '../types.js';

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(reply: FastifyReply, status: number, title: string, body: string): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
    .header('x-frame-options', 'DENY')
    .send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escape(title)}</title>`
      + `<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em}button{font-size:1em;padding:.5em 1.5em}</style></head>`
      + `<body><h1>${escape(title)}</h1>${body}</body></html>\n`);
}

const names = (v: ApprovalView) => `<ul>${v.names.map((n) => `<li><code>${escape(n)}</code></li>`).join('')}</ul>`;

/**
 * The confirmation page of EMAIL validation (DESIGN §5.6): GET shows the request and a button,
 * only POST approves — mail scanners and link previews follow links, they do not submit forms.
 * The token in the path is the only credential; it is never logged in full.
 */
export function registerApprovalPage(app: App, deps: { emailApprovals: EmailApprovals }): void {
  const options = { schema: { hide: true }, config: {} } as const;
  const tokenOk = (t: string) => /^cda_[A-Za-z0-9_-]{20,100}$/.test(t);
  const missing = (reply: FastifyReply) => page(reply, 404, 'Link not valid', '<p>This approval link is not valid. It may have been replaced by a newer mail.</p>');

  app.get<{ Params: { token: string } }>('/dcv/approve/:token', options, async (request, reply) => {
    const view = tokenOk(request.params.token) ? await deps.emailApprovals.view(request.params.token) : undefined;
    if (view === undefined) return missing(reply);
    if (view.state !== 'pending') return page(reply, 200, 'Already answered', `<p>This request for order ${view.orderId} needs nothing more from you.</p>`);
    return page(reply, 200, 'Approve a certificate', `<p>Order ${view.orderId} (${escape(view.productCode)}) asks for a certificate for:</p>${names(view)}`
      + `<p>Approve only if you, as <code>${escape(view.approver)}</code>, expect this request.</p>`
      + `<form method="post"><button type="submit">Approve</button></form>`);
  });

  app.post<{ Params: { token: string } }>('/dcv/approve/:token', options, async (request, reply) => {
    const view = tokenOk(request.params.token) ? await deps.emailApprovals.approve(request.params.token, request.ip) : undefined;
    if (view === undefined) return missing(reply);
    return page(reply, 200, 'Approved', `<p>Thank you: the certificate for these names may now be issued.</p>${names(view)}`);
  });
}
