import type { FastifyReply } from 'fastify';
import { escapeHtml as escape, page } from '../ui/page.js';
import type { ApprovalView, EmailApprovals } from '../../ra/dcv/email-approval.js';
import type { App } from '../types.js';

const names = (v: ApprovalView) => `<ul>${v.names.map((n) => `<li><code>${escape(n)}</code></li>`).join('')}</ul>`;

/**
 * The confirmation page of EMAIL validation (DESIGN §5.6): GET shows the request and a button,
 * only POST approves — mail scanners and link previews follow links, they do not submit forms.
 * The token in the path is the only credential; it is never logged (the request log's URL
 * serializer, log-redaction.ts, shows `/dcv/approve/[redacted]`).
 */
export function registerApprovalPage(app: App, deps: { emailApprovals: EmailApprovals }): void {
  const options = { schema: { hide: true }, config: {} } as const;
  const tokenOk = (t: string) => /^cda_[A-Za-z0-9_-]{20,100}$/.test(t);
  const missing = (reply: FastifyReply) =>
    page(
      reply,
      404,
      'Link not valid',
      '<p>This approval link is not valid. It may have been replaced by a newer mail.</p>',
    );

  app.get<{ Params: { token: string } }>('/dcv/approve/:token', options, async (request, reply) => {
    const view = tokenOk(request.params.token) ? await deps.emailApprovals.view(request.params.token) : undefined;
    if (view === undefined) return missing(reply);
    if (view.state !== 'pending')
      return page(
        reply,
        200,
        'Already answered',
        `<p>This request for order ${view.orderId} needs nothing more from you.</p>`,
      );
    return page(
      reply,
      200,
      'Approve a certificate',
      `<p>Order ${view.orderId} (${escape(view.productCode)}) asks for a certificate for:</p>${names(view)}` +
        `<p>Approve only if you, as <code>${escape(view.approver)}</code>, expect this request.</p>` +
        `<form method="post"><button type="submit">Approve</button></form>`,
    );
  });

  app.post<{ Params: { token: string } }>('/dcv/approve/:token', options, async (request, reply) => {
    const view = tokenOk(request.params.token)
      ? await deps.emailApprovals.approve(request.params.token, request.ip)
      : undefined;
    if (view === undefined) return missing(reply);
    return page(
      reply,
      200,
      'Approved',
      `<p>Thank you: the certificate for these names may now be issued.</p>${names(view)}`,
    );
  });
}
