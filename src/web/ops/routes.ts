import { CertdeskError, isCertdeskError } from '../../core/index.js';
import { failure } from '../envelope.js';
import type { Metrics } from './metrics.js';
import type { App } from '../types.js';

export interface OpsDeps {
  readonly metrics: Metrics;
  /**
   * Resolves when the service can do its work (the database answers, the CA can issue); /readyz
   * answers 503 otherwise, with the reason when it throws a notReady CertdeskError.
   */
  readonly ready: () => Promise<void>;
}

/** /healthz (process up), /readyz (database reachable, CA able to issue) and /metrics (Prometheus text). */
export function registerOps(app: App, deps: OpsDeps): void {
  const { metrics } = deps;
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  const hide = { hide: true };
  const noLimit = { rateLimit: false } as const;
  app.get('/healthz', { schema: hide, config: noLimit }, async () => ({ success: true, status: 'ok' }));
  app.get('/readyz', { schema: hide, config: noLimit }, async (request, reply) => {
    try {
      await deps.ready();
      return { success: true, status: 'ready' };
    } catch (err) {
      request.log.warn({ err }, 'readiness check failed');
      // A database error's text stays in the log; a notReady of our own carries its reason.
      const { status, body } = failure(
        isCertdeskError(err) && err.kind === 'notReady' ? err : new CertdeskError('notReady'),
      );
      return reply.code(status).send(body);
    }
  });
  app.get('/metrics', { schema: hide, config: noLimit }, async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
