import { connect } from 'node:net';
import { Writable } from 'node:stream';

/** What came back on a raw connection, and when the server closed it. */
export interface RawExchange {
  /** Everything the server sent, latin1. */
  readonly text: string;
  /** The status code of the first response line, or undefined when nothing came back. */
  readonly status: number | undefined;
  /** Milliseconds from connecting until the server ended or reset the connection. */
  readonly closedAfterMs: number;
}

export interface RawOptions {
  /** Written at once after connecting. */
  readonly head: string;
  /** Bytes then written one at a time, `intervalMs` apart, while the connection is open. */
  readonly trickle?: string;
  readonly intervalMs?: number;
  /** Give up (reject) when the server has not closed the connection by then. */
  readonly giveUpMs: number;
}

/**
 * Talks HTTP/1.1 over a plain TCP socket, as a slow or broken client would: writes `head`, then
 * trickles bytes, and resolves once the server closes the connection (end, reset or close).
 * Rejects when the server keeps the connection open past `giveUpMs`.
 */
export function rawExchange(port: number, options: RawOptions): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let trickled = 0;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${options.giveUpMs} ms`));
    }, options.giveUpMs);
    const done = () => {
      clearTimeout(giveUp);
      clearInterval(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
      resolve({
        text,
        status: status === undefined ? undefined : Number(status),
        closedAfterMs: performance.now() - started,
      });
    };
    socket.on('data', (c: Buffer) => chunks.push(c));
    // A reset after the server's answer is still a close: the answer is what the test reads.
    socket.on('error', () => undefined);
    socket.on('close', done);
    socket.on('connect', () => {
      socket.write(options.head, 'latin1');
      const trickle = options.trickle;
      if (trickle === undefined || trickle === '') return;
      timer = setInterval(() => {
        if (socket.destroyed || !socket.writable || trickled >= trickle.length) return void clearInterval(timer);
        socket.write(trickle[trickled++]!, 'latin1');
      }, options.intervalMs ?? 200);
    });
  });
}

/** A pino destination that keeps every log line (JSON text) in `lines`. */
export function logCapture(): { lines: string[]; sink: Writable } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, sink };
}
