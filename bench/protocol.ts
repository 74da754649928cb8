// Messages between the benchmark runner (parent) and a server child, over Node's IPC channel.
// The parent stops a child with SIGTERM (or the child stops when the IPC channel closes).

/** What a server child serves: the bare Fastify baseline or the real certdesk app. */
export type ServerKind = 'baseline' | 'certdesk';

/**
 * What a certdesk child prepares before it reports ready (bench/server.ts):
 * - `plain`: a customer with an API client, and one issued leaf for the OCSP target;
 * - `orders` / `ordersPg`: also a DNS server on loopback (CERTDESK_DNS_SERVERS) holding the TXT
 *   record of the bench CSR, and one order issued inline; `ordersPg` on a fresh PostgreSQL database;
 * - `orders1m` / `orders10k`: also 1,000,000 (10,000) orders of the bench customer, seeded
 *   straight into SQLite: the list targets at both sizes give the growth of their latency.
 */
export type ServerSetup = 'plain' | 'orders' | 'ordersPg' | 'orders1m' | 'orders10k' | 'vouchers';

/** Facts a child made during its setup that the requests need (or that the report shows). */
export interface ChildFixtures {
  /** GET path of an OCSP request for a leaf the child issued (RFC 6960 A.1). */
  readonly ocspPath?: string;
  /** A COMPLETE order of the bench customer, issued inline (setups `orders`, `ordersPg`). */
  readonly orderId?: number;
  /** `sqlite` or `postgres`. */
  readonly database?: string;
  /** The bench customer's API client and its ADMIN user's sign-in (targets `token`, `signIn`). */
  readonly client?: { readonly clientId: string; readonly clientSecret: string };
  readonly signIn?: { readonly username: string; readonly password: string };
  /** Setups `orders1m`, `orders10k`: what was seeded and how long it took. */
  readonly seeded?: {
    readonly orders: number;
    readonly names: number;
    readonly seconds: number;
    readonly dbBytes: number;
  };
  /** Setup `vouchers`: codes of vouchers for the inline-issuance product, each redeemable once. */
  readonly voucherCodes?: readonly string[];
  /** Setup `orders1m`: a GET /ModifiedOrders window (spec timestamps) and how many orders it holds. */
  readonly modifiedWindow?: { readonly from: string; readonly to: string; readonly orders: number };
  /** Setups `orders1m`, `orders10k`: the CommonName of one seeded order present at both sizes (pattern searches). */
  readonly probeCommonName?: string;
}

export type ChildMessage =
  | { type: 'ready'; port: number; credentials?: { clientId: string; clientSecret: string }; fixtures: ChildFixtures }
  | { type: 'usage'; id: number; cpuMicros: number; dnsCpuMicros: number; eluActive: number; eluIdle: number }
  | { type: 'ack'; id: number }
  | { type: 'error'; id?: number; message: string };

export type ParentMessage =
  | { type: 'usage'; id: number }
  | { type: 'profile-start'; id: number }
  | { type: 'profile-stop'; id: number; file: string };
