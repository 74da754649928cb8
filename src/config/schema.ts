/**
 * The one configuration schema: every environment variable certdesk reads, its default and
 * how it is parsed. DESIGN §4 fixes the names; `docs/configuration.md` documents them.
 * A parser returns the value or a string saying what is wrong with the text.
 */
export type Parser<T> = (text: string) => T | { problem: string };

export interface Key<T> {
  readonly env: string;
  /** Text default; undefined = optional with no value. */
  readonly default?: string;
  readonly parse: Parser<T>;
  /** May be given as `<env>_FILE` naming a file that holds the value (secrets). */
  readonly fileable?: boolean;
  readonly doc: string;
}

const text: Parser<string> = (t) => t;
const port: Parser<number> = (t) => {
  const n = Number(t);
  return /^\d+$/.test(t) && n >= 0 && n <= 65535 ? n : { problem: `not a port number (0-65535): ${t}` };
};
const positiveInt: Parser<number> = (t) => {
  const n = Number(t);
  return /^\d+$/.test(t) && n > 0 && Number.isSafeInteger(n) ? n : { problem: `not a positive integer: ${t}` };
};
const nonNegativeInt: Parser<number> = (t) => {
  const n = Number(t);
  return /^\d+$/.test(t) && Number.isSafeInteger(n) ? n : { problem: `not a whole number ≥ 0: ${t}` };
};
/** A whole number from 0 to `max` (a period a timer waits: Node's timers hold at most 2^31 - 1 ms). */
const wholeUpTo =
  (max: number): Parser<number> =>
  (t) => {
    const n = nonNegativeInt(t);
    return typeof n === 'number' && n > max ? { problem: `more than ${max}: ${t}` } : n;
  };
const bool: Parser<boolean> = (t) => {
  const v = t.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  return { problem: `not a boolean (true/false): ${t}` };
};
/** Fastify's trustProxy: false, a hop count, or the proxies' addresses (never `true` = every hop). */
const trustProxy: Parser<false | number | string[]> = (t) => {
  const v = t.trim().toLowerCase();
  if (v === '' || v === 'false' || v === '0') return false;
  if (v === 'true') return 1;
  if (/^\d{1,2}$/.test(v)) return Number(v);
  const list = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = list.filter((s) => !/^[0-9a-f.:]+(\/\d{1,3})?$/.test(s));
  return bad.length === 0 ? list : { problem: `not a hop count or address list: ${bad.join(', ')}` };
};
const databaseUrl: Parser<string> = (t) => {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(t)?.[1]?.toLowerCase();
  if (scheme === undefined || scheme === 'postgres' || scheme === 'postgresql') return t;
  return { problem: `unsupported scheme ${scheme}:// (postgres:// for PostgreSQL, or a SQLite file path)` };
};
const url: Parser<string> = (t) => {
  try {
    const u = new URL(t);
    return ['http:', 'https:'].includes(u.protocol) ? t.replace(/\/+$/, '') : { problem: `not an http(s) URL: ${t}` };
  } catch {
    return { problem: `not a URL: ${t}` };
  }
};
const smtpUrl: Parser<string> = (t) => {
  try {
    const u = new URL(t);
    return ['smtp:', 'smtps:'].includes(u.protocol) ? t : { problem: 'not an smtp:// or smtps:// URL' };
  } catch {
    return { problem: 'not a URL' };
  }
};
const hostPorts: Parser<string[]> = (t) => {
  const list = t
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = list.filter((s) => !/^(\[[0-9a-fA-F:.]+\]|[0-9a-zA-Z.-]+)(:\d{1,5})?$/.test(s));
  return bad.length === 0 ? list : { problem: `not host:port: ${bad.join(', ')}` };
};
const list: Parser<string[]> = (t) =>
  t
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
const logLevel: Parser<string> = (t) =>
  ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(t) ? t : { problem: `not a log level: ${t}` };

const rsaBits: Parser<number> = (t) =>
  ['2048', '3072', '4096'].includes(t.trim()) ? Number(t) : { problem: `not 2048, 3072 or 4096: ${t}` };

export const SCHEMA = {
  host: {
    env: 'CERTDESK_HOST',
    default: '127.0.0.1',
    parse: text,
    doc: 'Address of the API, OAuth, PKI and web listener.',
  },
  port: { env: 'CERTDESK_PORT', default: '8080', parse: port, doc: 'Port of that listener.' },
  kvPort: { env: 'CERTDESK_KV_PORT', default: '8081', parse: port, doc: 'Port of the hash store listener (0 = off).' },
  dataDir: { env: 'CERTDESK_DATA_DIR', default: './data', parse: text, doc: 'SQLite file, CA key files, outbox.' },
  databaseUrl: {
    env: 'CERTDESK_DATABASE_URL',
    parse: databaseUrl,
    fileable: true,
    doc: '`postgres://…` for PostgreSQL; unset = SQLite file `certdesk.db` in the data directory.',
  },
  databasePrepared: {
    env: 'CERTDESK_DATABASE_PREPARED',
    default: 'true',
    parse: bool,
    doc: 'PostgreSQL: run statements as named prepared statements, parsed once per connection. `false` behind a connection pooler in transaction mode that does not keep them (PgBouncer before 1.21, or without `max_prepared_statements`).',
  },
  databaseQueryTimeoutMs: {
    env: 'CERTDESK_DATABASE_QUERY_TIMEOUT_MS',
    default: '30000',
    parse: nonNegativeInt,
    doc: 'PostgreSQL: milliseconds the answer to one statement may take; past it the statement is cancelled on the server, and 2 s later, without an answer, the connection is dropped as lost (a path cut silently, a proxy that stopped answering); the request is answered 503. 0 = as long as TCP takes (about 15 minutes, or for ever behind a hung proxy). Migrations wait as long as they take. See docs/operations.md for the server settings to pair it with.',
  },
  redisUrl: {
    env: 'CERTDESK_REDIS_URL',
    parse: (t) => (/^rediss?:\/\//i.test(t) ? t : { problem: 'a redis:// or rediss:// URL' }),
    fileable: true,
    doc: '`redis://…`: rate limits shared by every process, and cache invalidation through Redis pub/sub (else PostgreSQL LISTEN/NOTIFY); unset = rate limits per process.',
  },
  redisPrefix: {
    env: 'CERTDESK_REDIS_PREFIX',
    default: 'certdesk',
    parse: (t) => (/^[A-Za-z0-9_.-]{1,64}$/.test(t) ? t : { problem: '1 to 64 letters, digits, _ . or -' }),
    doc: "What this deployment's Redis keys and channel start with: deployments sharing one Redis need different prefixes.",
  },
  publicUrl: {
    env: 'CERTDESK_PUBLIC_URL',
    parse: url,
    doc: 'Base of links put in certificates and e-mails; default `http://<host>:<port>`.',
  },
  catalog: {
    env: 'CERTDESK_CATALOG',
    parse: text,
    doc: 'Path of a product catalog file (docs/catalog.md); unset = the bundled catalog.',
  },
  dnsServers: {
    env: 'CERTDESK_DNS_SERVERS',
    parse: hostPorts,
    doc: '`host:port,…` for every DCV, CAA and approver lookup; unset = system resolvers.',
  },
  validationHttpPort: {
    env: 'CERTDESK_VALIDATION_HTTP_PORT',
    default: '80',
    parse: port,
    doc: 'Port the FILE check connects to (443 for https).',
  },
  validationAllowPrivate: {
    env: 'CERTDESK_VALIDATION_ALLOW_PRIVATE',
    default: 'false',
    parse: bool,
    doc: 'Allow DCV fetches to loopback/private addresses (tests only).',
  },
  scanPort: {
    env: 'CERTDESK_SCAN_PORT',
    default: '443',
    parse: port,
    doc: 'TLS port the scans (vulnerability and configuration assessment) connect to.',
  },
  scanHttpPort: {
    env: 'CERTDESK_SCAN_HTTP_PORT',
    default: '80',
    parse: port,
    doc: 'HTTP port the scans check for a redirect to https.',
  },
  scanTimeoutMs: {
    env: 'CERTDESK_SCAN_TIMEOUT_MS',
    default: '5000',
    parse: positiveInt,
    doc: 'A scan of one name gives up after this many milliseconds ("could not scan").',
  },
  scanConcurrency: {
    env: 'CERTDESK_SCAN_CONCURRENCY',
    default: '4',
    parse: positiveInt,
    doc: 'Names one process scans at once.',
  },
  scanDelayDays: {
    env: 'CERTDESK_SCAN_DELAY_DAYS',
    default: '4',
    parse: nonNegativeInt,
    doc: 'Days after issuance (and each reissue) until the configuration scan behind ConfigurationAssessment.',
  },
  smtpUrl: {
    env: 'CERTDESK_SMTP_URL',
    parse: smtpUrl,
    fileable: true,
    doc: '`smtp://host:port`; unset = mail goes to the outbox only.',
  },
  tokenTtl: {
    env: 'CERTDESK_TOKEN_TTL',
    default: '86400',
    parse: positiveInt,
    doc: 'Access token lifetime in seconds (spec sample: 86400).',
  },
  refreshTokenTtl: {
    env: 'CERTDESK_REFRESH_TOKEN_TTL',
    default: '2592000',
    parse: positiveInt,
    doc: 'Refresh token lifetime in seconds (30 days).',
  },
  authCacheSeconds: {
    env: 'CERTDESK_AUTH_CACHE_SECONDS',
    default: '5',
    parse: nonNegativeInt,
    doc: 'How long a process may reuse a resolved token without asking the database (0 = never). Revocations made in the same process act at once; others within this time.',
  },
  caRecheckSeconds: {
    env: 'CERTDESK_CA_RECHECK_SECONDS',
    default: '60',
    parse: wholeUpTo(86_400),
    doc: 'How often each process compares the CA hierarchy it has loaded with the database (0 = never; at most 86400). A CA certificate created or distrusted by another process is loaded as soon as its news arrive, and within this time when they were lost.',
  },
  rateLimit: {
    env: 'CERTDESK_RATE_LIMIT',
    default: '1200',
    parse: positiveInt,
    doc: 'Requests per minute per API application (all its tokens together).',
  },
  rateLimitAnonymous: {
    env: 'CERTDESK_RATE_LIMIT_ANONYMOUS',
    default: '60',
    parse: positiveInt,
    doc: 'Requests per minute per client address without a valid token (token endpoint, anonymous endpoints).',
  },
  bodyLimit: {
    env: 'CERTDESK_BODY_LIMIT',
    default: '1048576',
    parse: positiveInt,
    doc: 'Largest accepted request body in bytes (413 beyond).',
  },
  requestTimeoutMs: {
    env: 'CERTDESK_REQUEST_TIMEOUT_MS',
    default: '30000',
    parse: positiveInt,
    doc: 'Milliseconds a request (headers and body) may take to arrive, on the API and hash store listeners; a slower or stalled one gets 408 and its connection is closed (within about a second after).',
  },
  blockedNames: {
    env: 'CERTDESK_BLOCKED_NAMES',
    default: '',
    parse: list,
    doc: 'Extra names refused by /ValidateName and orders, comma-separated (`example.com`, `*.example.com`, or a bare label).',
  },
  trustProxy: {
    env: 'CERTDESK_TRUST_PROXY',
    default: 'false',
    parse: trustProxy,
    doc: 'Reverse proxies whose X-Forwarded-For is believed: `false`, a hop count (`1` = the nearest proxy; `true` means 1), or a comma list of proxy addresses/CIDRs. Never trust every hop: the client writes the left-most entry.',
  },
  caKeyFile: {
    env: 'CERTDESK_CA_KEY_FILE',
    parse: text,
    doc: 'File holding the 256-bit key that encrypts the CA private keys (AES-256-GCM); created 0600 on first start. Unset = `ca-keys.secret` in the data directory. Keep a copy apart from the database: without it the CA cannot sign.',
  },
  caRsaRootBits: {
    env: 'CERTDESK_CA_RSA_ROOT_BITS',
    default: '4096',
    parse: rsaBits,
    doc: 'RSA modulus of new CA roots made by `ca init` (2048, 3072 or 4096); existing keys are kept.',
  },
  caRsaIntermediateBits: {
    env: 'CERTDESK_CA_RSA_INTERMEDIATE_BITS',
    default: '2048',
    parse: rsaBits,
    doc: 'RSA modulus of new issuing CAs made by `ca init` (2048, 3072 or 4096): 2048 signs about 4x faster than 4096.',
  },
  caMaxValidityDays: {
    env: 'CERTDESK_CA_MAX_VALIDITY_DAYS',
    parse: positiveInt,
    doc: 'Longest leaf certificate lifetime in days for a private PKI. Unset = the Baseline Requirements schedule on the issue date (200 days from 2026-03-15, 100 from 2027-03-15, 47 from 2029-03-15).',
  },
  logLevel: { env: 'CERTDESK_LOG_LEVEL', default: 'info', parse: logLevel, doc: 'pino log level.' },
  worker: { env: 'CERTDESK_WORKER', default: 'true', parse: bool, doc: 'Run the job worker inside `serve`.' },
} as const satisfies Record<string, Key<unknown>>;

type ValueOf<K> = K extends Key<infer T> ? T : never;
type Schema = typeof SCHEMA;

/** The validated configuration: keys with a default are always set. */
export type Config = {
  readonly [K in keyof Schema]: Schema[K] extends { default: string }
    ? ValueOf<Schema[K]>
    : ValueOf<Schema[K]> | undefined;
};
