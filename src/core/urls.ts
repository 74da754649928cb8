/**
 * Every URL the service hands out — in certificates (CRL, OCSP, CA issuers), in e-mails (approval
 * links, order links) and in the API's own documents — built from CERTDESK_PUBLIC_URL in this one
 * place, so a link and the route that serves it cannot drift apart.
 */
export class ServiceUrls {
  /** The base without a trailing slash. */
  readonly base: string;

  constructor(publicUrl: string) {
    this.base = publicUrl.replace(/\/+$/, '');
  }

  /** The DER CRL of an issuing CA key (`GET /crl/<keyId>.crl`). */
  crl(keyId: string): string {
    return `${this.base}/crl/${keyId}.crl`;
  }

  /** A CA certificate, DER (`GET /pki/<id>.crt`): the AIA caIssuers link. */
  caCertificate(caId: string): string {
    return `${this.base}/pki/${caId}.crt`;
  }

  /** The OCSP responder (RFC 6960 GET and POST). */
  ocsp(): string {
    return `${this.base}/ocsp`;
  }

  /** The page where a domain's approver confirms an EMAIL validation (GET shows, POST approves). */
  approval(token: string): string {
    return `${this.base}/dcv/approve/${token}`;
  }

  /** An order in the API, as mails point at it. */
  order(orderId: number): string {
    return `${this.base}/rest/v1/Order/${orderId}`;
  }

  /** The host name mails are sent from (`noreply@<host>`). */
  mailHost(): string {
    try {
      return new URL(this.base).hostname;
    } catch {
      return 'localhost';
    }
  }
}
