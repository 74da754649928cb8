import type { Clock, JobId } from '../../core/index.js';
import type { BuiltinCa } from '../../ca/index.js';
import { ensureRecurring, type JobsRepo } from '../../storage/index.js';

/** How often the CRL refresh looks for CRLs past half their validity. */
export const CRL_REFRESH_EVERY = 3600;

/**
 * The public face of the built-in CA for the web's `/crl/`, `/ocsp` and `/pki/` endpoints, and
 * the recurring CRL refresh. Everything here reads or re-signs status; nothing issues.
 */
export class Pki {
  constructor(
    private readonly deps: {
      ca: Pick<BuiltinCa, 'crl' | 'ocsp' | 'caCertificate' | 'list' | 'refreshDueCrls'>;
      jobs: Pick<JobsRepo, 'enqueue'>;
      clock: Clock;
    },
  ) {}

  /** DER CRL of an issuing CA key, or undefined when there is no such issuer. */
  crl(issuerId: string): Promise<Uint8Array | undefined> {
    return this.deps.ca.crl(issuerId);
  }

  /** DER OCSP response for a DER request (malformed requests get an OCSP error response, not an exception). */
  ocsp(request: Uint8Array): Promise<Uint8Array> {
    return this.deps.ca.ocsp(request);
  }

  caCertificate(id: string): Uint8Array | undefined {
    return this.deps.ca.caCertificate(id);
  }

  caCertificates(): ReturnType<BuiltinCa['list']> {
    return this.deps.ca.list();
  }

  async schedule(): Promise<void> {
    await ensureRecurring(this.deps.jobs, 'ca.refresh-crls', {}, CRL_REFRESH_EVERY, this.deps.clock.nowSeconds());
  }

  /** Job `ca.refresh-crls`: re-signs due CRLs, then queues the next run. */
  async refreshCrls(_payload: Record<string, never>, ctx: { readonly id: JobId }): Promise<void> {
    await this.deps.ca.refreshDueCrls();
    await ensureRecurring(this.deps.jobs, 'ca.refresh-crls', {}, CRL_REFRESH_EVERY, this.deps.clock.nowSeconds(), {
      after: ctx.id,
    });
  }
}
