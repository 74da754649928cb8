// The certificate of a server that speaks only TLS 1.3, where the Certificate message is
// encrypted: node:tls finishes the handshake (no verification: the checks are ours) and hands over
// the chain and any stapled OCSP response.
import { connect, type ConnectionOptions, type DetailedPeerCertificate } from 'node:tls';
import { isIP } from 'node:net';

/** The served chain (leaf first, as node:tls links it) and whether OCSP was stapled; undefined on failure. */
export function tls13Certificate(o: {
  readonly address: string;
  readonly port: number;
  readonly name: string;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
}): Promise<{ chain: Buffer[]; ocspStapled: boolean } | undefined> {
  return new Promise((resolve) => {
    let ocspStapled = false;
    // requestOCSP is a TLSSocket option that tls.connect passes on; @types/node leaves it out of ConnectionOptions.
    const options: ConnectionOptions & { requestOCSP: boolean } = {
      host: o.address,
      port: o.port,
      ...(isIP(o.name) === 0 ? { servername: o.name } : {}),
      rejectUnauthorized: false,
      requestOCSP: true,
      minVersion: 'TLSv1.3',
    };
    const socket = connect(options);
    const finish = (result: { chain: Buffer[]; ocspStapled: boolean } | undefined): void => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(result);
    };
    const onAbort = (): void => finish(undefined);
    const timer = setTimeout(onAbort, o.timeoutMs);
    o.signal.addEventListener('abort', onAbort, { once: true });
    socket.on('OCSPResponse', (response: Buffer | null) => (ocspStapled = response !== null && response.length > 0));
    socket.once('secureConnect', () => {
      const chain: Buffer[] = [];
      let cert: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
      // node links the sent certificates leaf to root and may append the root from its own store.
      while (cert?.raw !== undefined && !chain.some((c) => c.equals(cert!.raw))) {
        chain.push(cert.raw);
        cert = cert.issuerCertificate;
      }
      finish(chain.length > 0 ? { chain, ocspStapled } : undefined);
    });
    socket.once('error', () => finish(undefined));
  });
}
