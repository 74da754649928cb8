import type { FastifyReply } from 'fastify';
import type { Pki } from '../../ra/issuance/pki.js';
import type { App } from '../types.js';

export interface PkiDeps {
  readonly pki: Pick<Pki, 'crl' | 'ocsp' | 'caCertificate' | 'caCertificates'>;
}

/** Largest OCSP request accepted: one CertID with a nonce is ~120 bytes. */
const MAX_OCSP_REQUEST = 4096;

/**
 * The relying-party side of the built-in CA: CRLs at `/crl/<issuer>.crl` (DER), OCSP at `/ocsp`
 * (RFC 6960 GET and POST), CA certificates at `/pki/<id>.crt` (DER) or `.pem`, and `/pki/` (a list).
 * Public, cacheable and not rate limited: browsers and TLS servers fetch these at volume, every
 * answer comes from stored or cached signed data, and nothing here signs for an unknown serial.
 */
export async function registerPki(app: App, deps: PkiDeps): Promise<void> {
  await app.register(async (pki) => {
    pki.addContentTypeParser(
      'application/ocsp-request',
      { parseAs: 'buffer', bodyLimit: MAX_OCSP_REQUEST },
      (_request, body, done) => done(null, body),
    );
    const options = { schema: { hide: true }, config: { rateLimit: false } } as const;

    pki.get<{ Params: { file: string } }>('/crl/:file', options, async (request, reply) => {
      const m = /^([a-z0-9-]{1,100})\.crl$/.exec(request.params.file);
      const der = m === null ? undefined : await deps.pki.crl(m[1]!);
      if (der === undefined) return reply.code(404).type('text/plain; charset=utf-8').send('no such CRL\n');
      return reply.type('application/pkix-crl').header('cache-control', 'public, max-age=3600').send(Buffer.from(der));
    });

    const answer = async (der: Uint8Array, reply: FastifyReply) => {
      const response = await deps.pki.ocsp(der);
      return reply
        .type('application/ocsp-response')
        .header('cache-control', 'public, max-age=3600')
        .send(Buffer.isBuffer(response) ? response : Buffer.from(response));
    };
    // GET {url}/{url-encoding of base64 of the DER request} (RFC 6960 appendix A.1); base64 holds '/'.
    pki.get<{ Params: { '*': string } }>('/ocsp/*', options, async (request, reply) => {
      let b64: string;
      try {
        b64 = decodeURIComponent(request.params['*']);
      } catch {
        b64 = '';
      }
      const der = /^[A-Za-z0-9+/=\s]{1,6000}$/.test(b64)
        ? Buffer.from(/\s/.test(b64) ? b64.replace(/\s/g, '') : b64, 'base64')
        : Buffer.alloc(0);
      return answer(der, reply);
    });
    pki.post('/ocsp', options, async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      return answer(body, reply);
    });

    pki.get<{ Params: { file: string } }>('/pki/:file', options, async (request, reply) => {
      const m = /^([a-z0-9-]{1,100})\.(crt|pem)$/.exec(request.params.file);
      const der = m === null ? undefined : deps.pki.caCertificate(m[1]!);
      if (der === undefined) return reply.code(404).type('text/plain; charset=utf-8').send('no such CA certificate\n');
      if (m![2] === 'pem') {
        const b64 = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n');
        return reply
          .type('application/x-pem-file')
          .send(`-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`);
      }
      return reply
        .type('application/pkix-cert')
        .header('cache-control', 'public, max-age=86400')
        .send(Buffer.from(der));
    });
    pki.get('/pki/', options, async () => ({
      success: true,
      CACertificates: deps.pki.caCertificates().map((c) => ({
        ID: c.id,
        Brand: c.brand,
        Role: c.role,
        KeyType: c.keyType,
        KeyBits: c.bits,
        Subject: c.subject,
        Parent: c.parent,
        NotBefore: new Date(c.notBefore * 1000).toISOString(),
        NotAfter: new Date(c.notAfter * 1000).toISOString(),
        Distrust: c.distrust === null ? null : { Phase1: c.distrust.phase1, Phase2: c.distrust.phase2 },
        URL: `/pki/${c.id}.crt`,
      })),
    }));
  });
}
