import { CertdeskError } from '../../core/index.js';
import { failure } from '../envelope.js';
import type { Metrics } from './metrics.js';
import type { App } from '../types.js';

export interface OpsDeps {
  readonly metrics: Metrics;
  /**
   * The state of each part the service needs (the database, Redis when configured, the CA's keys);
   * /readyz answers 200 when every part is `ok` (or `not configured`), 503 with them otherwise.
   */
  readonly ready: () => Promise<Readiness>;
}

/** What /readyz reports: each part, `ok`, `not configured`, or what is wrong (no secrets, no error texts). */
export type Readiness = Readonly<Record<string, string>>;

/** /healthz (process up), /readyz (database, Redis and the CA's keys) and /metrics (Prometheus text). */
export function registerOps(app: App, deps: OpsDeps): void {
  const { metrics } = deps;
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    done();
  });

  const hide = { hide: true };
  const noLimit = { rateLimit: false } as const;
  app.get('/healthz', { schema: hide, config: noLimit }, async () => ({ success: true, status: 'ok' }));
  app.get('/readyz', { schema: hide, config: noLimit }, async (request, reply) => {
    const checks = await deps.ready();
    const problems = Object.entries(checks).filter(([, state]) => state !== 'ok' && state !== 'not configured');
    if (problems.length === 0) return { success: true, status: 'ready', checks };
    request.log.warn({ checks }, 'readiness check failed');
    const { status, body } = failure(
      new CertdeskError('notReady', `The service is not ready: ${problems.map(([k, v]) => `${k}: ${v}`).join('; ')}.`),
    );
    return reply.code(status).send({ ...body, checks });
  });
  app.get('/metrics', { schema: hide, config: noLimit }, async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
