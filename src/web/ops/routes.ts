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

/** What is not ready among `checks` ("part: state; …"), or undefined when each is `ok` or `not configured`. */
export function notReady(checks: Readiness): string | undefined {
  const problems = Object.entries(checks).filter(([, state]) => state !== 'ok' && state !== 'not configured');
  return problems.length === 0 ? undefined : problems.map(([k, v]) => `${k}: ${v}`).join('; ');
}

/** /healthz (process up), /readyz (database, Redis and the CA's keys) and /metrics (Prometheus text). */
export function registerOps(app: App, deps: OpsDeps): void {
  const { metrics } = deps;
  // The labelled series are looked up once per method, route and status (there are few): prom-client
  // hashes the label set on every inc/observe otherwise, a visible share of a cheap request.
  const series = new Map<string, { requests: { inc(): void }; duration: { observe(v: number): void } }>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const key = `${request.method} ${status} ${route}`;
    let s = series.get(key);
    if (s === undefined) {
      s = {
        requests: metrics.httpRequests.labels({ method: request.method, route, status: String(status) }),
        duration: metrics.httpDuration.labels({ method: request.method, route }),
      };
      series.set(key, s);
    }
    s.requests.inc();
    s.duration.observe(reply.elapsedTime / 1000);
    done();
  });

  const hide = { hide: true };
  const noLimit = { rateLimit: false } as const;
  app.get('/healthz', { schema: hide, config: noLimit }, async () => ({ success: true, status: 'ok' }));
  app.get('/readyz', { schema: hide, config: noLimit }, async (request, reply) => {
    const checks = await deps.ready();
    const problems = notReady(checks);
    if (problems === undefined) return { success: true, status: 'ready', checks };
    request.log.warn({ checks }, 'readiness check failed');
    const { status, body } = failure(new CertdeskError('notReady', `The service is not ready: ${problems}.`));
    return reply.code(status).send({ ...body, checks });
  });
  app.get('/metrics', { schema: hide, config: noLimit }, async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
