// One handshake probe over node:net: connect, send our ClientHello, read the server's plaintext
// flight until it is complete, an alert, the connection ends, or the probe's time is up. Probes
// share a small connection limit so a scan never opens more than a few sockets to one host.
import { connect } from 'node:net';
import type { Limiter } from '../core/index.js';
import { clientHello, readServerFlight, type HelloSpec, type ServerFlight } from './tls-wire.js';

/** How one probe ended. `closed`: the server hung up without a word, as some do to a version they refuse. */
export type ProbeOutcome =
  | { readonly kind: 'flight'; readonly flight: ServerFlight }
  | { readonly kind: 'closed' }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'not-tls' }
  | { readonly kind: 'unreachable'; readonly problem: string };

/** Where and how long: shared by every probe of one scan. */
export interface ProbeContext {
  readonly address: string;
  readonly port: number;
  /** Per-probe bound in ms. */
  readonly probeTimeoutMs: number;
  /** Aborted when the whole scan's time is up: every open probe ends at once. */
  readonly signal: AbortSignal;
  readonly limit: Limiter;
}

/** Sends `spec` and reads the answer. Never throws. */
export function probe(ctx: ProbeContext, spec: HelloSpec): Promise<ProbeOutcome> {
  return ctx.limit.run(() => probeOnce(ctx, spec));
}

const MAX_FLIGHT_BYTES = 256 * 1024;

function probeOnce(ctx: ProbeContext, spec: HelloSpec): Promise<ProbeOutcome> {
  if (ctx.signal.aborted) return Promise.resolve({ kind: 'timeout' });
  return new Promise((resolve) => {
    let data = Buffer.alloc(0);
    const socket = connect({ host: ctx.address, port: ctx.port });
    const finish = (outcome: ProbeOutcome): void => {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(outcome);
    };
    const onAbort = (): void => finish({ kind: 'timeout' });
    const timer = setTimeout(onAbort, ctx.probeTimeoutMs);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    socket.setNoDelay(true);
    socket.once('connect', () => socket.write(clientHello(spec)));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      let flight: ServerFlight;
      try {
        flight = readServerFlight(data);
      } catch {
        return finish({ kind: 'not-tls' });
      }
      if (flight.notTls) return finish({ kind: 'not-tls' });
      if (flight.done || flight.alert !== undefined || data.length > MAX_FLIGHT_BYTES)
        finish({ kind: 'flight', flight });
    });
    socket.once('end', () => {
      let flight: ServerFlight | undefined;
      try {
        flight = data.length > 0 ? readServerFlight(data) : undefined;
      } catch {
        flight = undefined;
      }
      finish(
        flight?.hello !== undefined || flight?.alert !== undefined ? { kind: 'flight', flight } : { kind: 'closed' },
      );
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      // A reset after the connection was made is a refusal of the hello, not an unreachable host.
      if (socket.bytesWritten > 0) finish({ kind: 'closed' });
      else finish({ kind: 'unreachable', problem: err.code ?? err.message });
    });
  });
}
