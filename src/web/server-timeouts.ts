/** The documented request timeout (docs/operations.md), CERTDESK_REQUEST_TIMEOUT_MS's default. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/**
 * How often Node looks for requests past their time. Its default (30 s) let a stalled request
 * live up to 30 s beyond the limit (and headers up to 60 + 30 s): a second bounds the overrun.
 */
const CHECK_INTERVAL_MS = 1_000;

/**
 * The Fastify options that close a slow or stalled request after `timeoutMs`, headers and body
 * together, on either listener: Node answers 408 through Fastify's client-error handler and
 * closes the connection, within `timeoutMs` + about a second. `requestTimeout` is Fastify's own
 * option (it sets the server's after creating it); `headersTimeout` (Node's default 60 s, longer
 * than any request may take) and the check interval can only be passed to `http.createServer`,
 * hence `http`. Idle keep-alive connections are not requests: `keepAliveTimeout` still governs them.
 * `extraHttp` carries a listener's other `http.createServer` options.
 */
export function requestTimeoutOptions<T extends object>(timeoutMs: number, extraHttp?: T) {
  return {
    requestTimeout: timeoutMs,
    http: {
      ...extraHttp,
      requestTimeout: timeoutMs,
      headersTimeout: timeoutMs,
      connectionsCheckingInterval: Math.min(CHECK_INTERVAL_MS, timeoutMs),
    },
  };
}
