import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The service's Prometheus metrics, on a registry of its own (several apps may share a process in tests). */
export interface Metrics {
  readonly registry: Registry;
  readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  readonly httpDuration: Histogram<'method' | 'route'>;
}

export interface MetricsOptions {
  /** Collect the Node process metrics (off where many apps share a process, as in tests). */
  readonly defaultMetrics: boolean;
  /** Jobs per status, read on each scrape (the queue is shared by every process). */
  readonly jobCounts?: () => Promise<Record<string, number>>;
  /** Seconds the longest-waiting due job has waited (jobs-repo `overdueSeconds`), read on each scrape. */
  readonly jobsOverdue?: () => Promise<number>;
  /** Certificates no order reaches (the reconciliation's orphans), read on each scrape. */
  readonly orphanCount?: () => Promise<number>;
}

export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'certdesk_' });
  const { jobCounts, jobsOverdue, orphanCount } = options;
  if (orphanCount !== undefined) {
    new Gauge({
      name: 'certdesk_orphan_certificates',
      help: 'Signed certificates that no order delivered and nobody revoked (should be 0; list them with `certdesk ca orphans`).',
      registers: [registry],
      async collect() {
        this.set(await orphanCount());
      },
    });
  }
  if (jobCounts !== undefined) {
    new Gauge({
      name: 'certdesk_jobs',
      help: 'Jobs in the durable queue by status (queued, running, done, dead).',
      labelNames: ['status'],
      registers: [registry],
      async collect() {
        for (const [status, count] of Object.entries(await jobCounts())) this.set({ status }, count);
      },
    });
  }
  if (jobsOverdue !== undefined) {
    new Gauge({
      name: 'certdesk_jobs_overdue_seconds',
      help: 'How long the longest-waiting due job has waited for a worker (0 when none): climbs when no worker runs or keeps up.',
      registers: [registry],
      async collect() {
        this.set(await jobsOverdue());
      },
    });
  }
  return {
    registry,
    httpRequests: new Counter({
      name: 'certdesk_http_requests_total',
      help: 'HTTP requests by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'certdesk_http_request_duration_seconds',
      help: 'HTTP request duration by method and route pattern.',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers: [registry],
    }),
  };
}
