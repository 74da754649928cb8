import pino, { type Logger, type LoggerOptions } from 'pino';

/**
 * What never reaches a log line, in one place: the pino options (serializers and redaction
 * paths) of every logger certdesk builds, the URL scrubber of both listeners' request logs and
 * the test that refuses secrets in a URL query. URLs are the leak that matters: a request line
 * is logged whole, and clients do put credentials in it (RFC 6749 §2.3.1 forbids exactly that).
 */

export const REDACTED = '[redacted]';

/**
 * Query parameter names whose values are secrets, case-insensitive: anything naming a secret,
 * token, password or key, and the OAuth names that do not say so (`code`, `code_verifier`).
 * `client_id` and other identifiers stay readable: they are what support searches logs for.
 */
const SECRET_PARAM =
  /secret|token|passw|api[-_]?key|private[-_]?key|credential|signature|^(?:code|code_verifier|key|sig|auth|authorization|session|cookie)$/i;

/**
 * certdesk's own secrets carry a prefix (ra/secrets.ts `newSecret`): `cda_` access tokens and
 * approval links, `cdr_` refresh tokens, `cds_` client secrets, `cdk_` hash-store keys, `cdw_`
 * and `cdo_` the sessions of people and operators, `cdu_` the web interface's own tokens. Found
 * anywhere in a URL they are redacted whatever parameter or path segment carries them.
 */
const OWN_SECRET = /cd[adrskwou]_[A-Za-z0-9_-]{16,}/;
const OWN_SECRETS = new RegExp(OWN_SECRET.source, 'g');

/** The EMAIL approval page's capability URL: the path segment after it is the credential. */
const APPROVAL_PATH = /(\/dcv\/approve\/)[^/]*/gi;

/** A voucher code in a path (`/Voucher/<code>`, `/Voucher/*\/<code>`, `/Order/*\/<code>`): whoever holds it can redeem it. */
const VOUCHER_PATH = /(\/Voucher\/(?:\*\/)?|\/Order\/\*\/)[^/]+/gi;

/** True when a query parameter of this name carries a secret (see SECRET_PARAM). */
export function isSecretParam(name: string): boolean {
  return SECRET_PARAM.test(name);
}

/**
 * The name of the first parameter of a parsed query that carries a secret (by its name, or a
 * value shaped like one of certdesk's own secrets), `[redacted]` when the name itself is one;
 * undefined when there is none. Used to refuse credentials sent in a URL, which proxies,
 * browsers and our own request log all record.
 */
export function secretInQuery(query: unknown): string | undefined {
  if (query === null || typeof query !== 'object') return undefined;
  for (const [name, value] of Object.entries(query as Record<string, unknown>)) {
    if (OWN_SECRET.test(name)) return REDACTED;
    const values: unknown[] = Array.isArray(value) ? value : [value];
    if (isSecretParam(name) || values.some((v) => typeof v === 'string' && OWN_SECRET.test(v))) return name;
  }
  return undefined;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/**
 * `url` (path and query, as in a request line) fit for a log: the approval token in
 * `/dcv/approve/<token>`, voucher codes in paths and the value of every secret-named query parameter become
 * `[redacted]`, and so does anything shaped like a certdesk secret. Parts with nothing to
 * redact keep their original encoding. Never throws.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  // Decoded first: the router matches `/dcv/%61pprove/…` as the approval route too.
  const decoded = safeDecode(path);
  const scrubbed = decoded
    .replace(APPROVAL_PATH, `$1${REDACTED}`)
    .replace(VOUCHER_PATH, `$1${REDACTED}`)
    .replace(OWN_SECRETS, REDACTED);
  const safePath = scrubbed === decoded ? path : scrubbed;
  if (q === -1) return safePath;
  const pairs = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      const plainName = safeDecode(name);
      if (OWN_SECRET.test(plainName)) return REDACTED;
      if (eq === -1) return pair;
      return isSecretParam(plainName) || OWN_SECRET.test(safeDecode(pair.slice(eq + 1))) ? `${name}=${REDACTED}` : pair;
    });
  return `${safePath}?${pairs.join('&')}`;
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * Error members that hold what a client sent: Node's HTTP parser errors carry the raw bytes
 * received (`rawPacket`, headers with credentials included).
 */
const RAW_ERROR_MEMBERS = ['rawPacket', 'headers', 'body'];

/** Serializers for `req` (no headers, redacted URL) and `err` (no raw request bytes). */
export const logSerializers = {
  req: (req: LoggedRequest) => ({
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  }),
  err: (err: Error) => scrubError(pino.stdSerializers.err(err) as Record<string, unknown>, 0),
};

/** A serialized error and its causes without raw request bytes or certdesk secrets in their texts. */
function scrubError(out: Record<string, unknown>, depth: number): Record<string, unknown> {
  for (const member of RAW_ERROR_MEMBERS) delete out[member];
  for (const member of ['message', 'stack'])
    if (typeof out[member] === 'string') out[member] = (out[member] as string).replace(OWN_SECRETS, REDACTED);
  const nested = [out.cause, ...(Array.isArray(out.aggregateErrors) ? out.aggregateErrors : [])];
  for (const inner of nested)
    if (depth < 5 && inner !== null && typeof inner === 'object')
      scrubError(inner as Record<string, unknown>, depth + 1);
  return out;
}

/** Members never logged at the top level or one level down (`{user: {password}}`), whatever logs them. */
const SECRET_MEMBERS = [
  'client_secret',
  'clientSecret',
  'password',
  'Password',
  'access_token',
  'accessToken',
  'refresh_token',
  'refreshToken',
  'token',
  'secret',
  'code_verifier',
  'api_key',
  'apiKey',
  'PrivateKey',
  'privateKey',
];
const SECRET_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'];

/** pino's redaction: secret members, and credential headers wherever a headers object is logged. */
export const logRedact = {
  paths: [
    ...SECRET_MEMBERS.flatMap((m) => [m, `*.${m}`]),
    ...SECRET_HEADERS.flatMap((h) => [`headers["${h}"]`, `*.headers["${h}"]`]),
  ],
  censor: REDACTED,
};

/** The options every certdesk pino logger is built with (spread into `pino({...})`). */
export const logRedaction = { serializers: logSerializers, redact: logRedact } satisfies LoggerOptions;

/**
 * `logger` with certdesk's serializers and redaction, whatever it was built with: each listener
 * applies it to the logger it is given, so a caller cannot hand it one that logs secrets.
 */
export function redactingLogger(logger: Logger): Logger {
  return logger.child({}, logRedaction);
}
