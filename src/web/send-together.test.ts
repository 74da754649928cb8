import Fastify, { type FastifyInstance } from 'fastify';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { checkPhaseBatches } from '../core/index.js';
import { sendTogether } from './send-together.js';

// The responses of one turn leave together (send-together.ts), on a bare Fastify app: what the
// hook must keep is every response whole, to the right request, and an unwritable one answered.

describe('sendTogether', () => {
  const apps: FastifyInstance[] = [];
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  /** An app with the hook, `/echo/:n` answering n, and a log of handler runs and response ends. */
  function app(): { app: FastifyInstance; log: string[] } {
    const log: string[] = [];
    const a = Fastify();
    apps.push(a);
    sendTogether(a);
    a.addHook('onRequest', (request, reply, done) => {
      const end = reply.raw.end.bind(reply.raw) as (...args: unknown[]) => unknown;
      reply.raw.end = ((...args: unknown[]) => {
        log.push(`end ${request.url}`);
        return end(...args);
      }) as typeof reply.raw.end;
      done();
    });
    a.get<{ Params: { n: string } }>('/echo/:n', async (request) => {
      log.push(`handled ${request.url}`);
      return { n: Number(request.params.n) };
    });
    // As GET /Order waits for its commit mark: answers in a check phase, from a batch's handover.
    const waitForCheckPhase = checkPhaseBatches<() => void>((b) => {
      log.push('released');
      b.forEach((f) => f());
    });
    a.get<{ Params: { n: string } }>('/waits/:n', async (request) => {
      await new Promise<void>((resolve) => waitForCheckPhase(resolve));
      return { n: Number(request.params.n) };
    });
    a.get('/bad-header', async (_request, reply) => reply.header('x-bad', 'a\nb').send('never sent'));
    return { app: a, log };
  }

  /** Sends `/<path>/0` … `/<path>/9` on ten connections at once, so that one poll phase reads them all. */
  async function tenTogether(a: FastifyInstance, path: string): Promise<void> {
    await a.listen({ port: 0, host: '127.0.0.1' });
    const { port } = a.server.address() as AddressInfo;
    let accepted = 0;
    const allAccepted = new Promise<void>((resolve) =>
      a.server.on('connection', () => {
        if (++accepted === 10) resolve();
      }),
    );
    const sockets = await Promise.all(
      Array.from(
        { length: 10 },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const s = connect(port, '127.0.0.1', () => resolve(s)).on('error', reject);
          }),
      ),
    );
    const answered = sockets.map(
      (s) =>
        new Promise<string>((resolve) => {
          let text = '';
          s.on('data', (d: Buffer) => {
            text += d.toString();
            if (text.includes('}')) resolve(text);
          });
        }),
    );
    // The server reads each connection once it has taken it in.
    await allAccepted;
    // Written in one go, the ten requests are all in the sockets when the server's poll phase reads them.
    sockets.forEach((s, n) => s.write(`GET /${path}/${n} HTTP/1.1\r\nHost: x\r\n\r\n`));
    // On a loaded machine the kernel may hand loopback data over a little later (ksoftirqd): this
    // thread waits before its next poll phase, so that the poll phase finds all ten.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    const texts = await Promise.all(answered);
    for (const s of sockets) s.destroy();
    texts.forEach((t, n) => expect(t).toContain(`{"n":${n}}`));
  }

  it('writes the responses of requests that arrived together after all of them were handled', async () => {
    const { app: a, log } = app();
    await tenTogether(a, 'echo');
    const lastHandled = log.findLastIndex((l) => l.startsWith('handled'));
    const firstEnd = log.findIndex((l) => l.startsWith('end'));
    expect(log.filter((l) => l.startsWith('end'))).toHaveLength(10);
    expect(firstEnd).toBeGreaterThan(lastHandled);
  });

  it('writes a response made in a check phase in that check phase, not a turn later', async () => {
    const { app: a, log } = app();
    // One mark per turn of the event loop: an immediate that queues itself again runs once in every check phase.
    let ticking = true;
    const tick = () => {
      log.push('turn');
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    try {
      await tenTogether(a, 'waits');
    } finally {
      ticking = false;
    }
    const released = log.indexOf('released');
    const lastEnd = log.findLastIndex((l) => l.startsWith('end'));
    expect(log.filter((l) => l === 'released')).toHaveLength(1);
    expect(log.filter((l) => l.startsWith('end'))).toHaveLength(10);
    expect(lastEnd).toBeGreaterThan(released);
    expect(log.slice(released, lastEnd).filter((l) => l === 'turn')).toEqual([]);
  });

  it('answers every request over HTTP with its own response, keep-alive, 50 at a time', async () => {
    const { app: a } = app();
    await a.listen({ port: 0, host: '127.0.0.1' });
    const { port } = a.server.address() as AddressInfo;
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, n) =>
          fetch(`http://127.0.0.1:${port}/echo/${round * 50 + n}`).then((r) => r.json() as Promise<{ n: number }>),
        ),
      );
      expect(answers.map((b) => b.n)).toEqual(Array.from({ length: 50 }, (_, n) => round * 50 + n));
    }
  });

  it('answers a response Node cannot write with the error handler, and goes on answering the others', async () => {
    const { app: a } = app();
    await a.listen({ port: 0, host: '127.0.0.1' });
    const { port } = a.server.address() as AddressInfo;
    const [bad, ...good] = await Promise.all([
      fetch(`http://127.0.0.1:${port}/bad-header`),
      ...Array.from({ length: 5 }, (_, n) => fetch(`http://127.0.0.1:${port}/echo/${n}`)),
    ]);
    expect(bad!.status).toBe(500);
    expect(bad!.headers.get('x-bad')).toBeNull();
    expect(good.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // The server is still up and answering.
    expect((await fetch(`http://127.0.0.1:${port}/echo/7`)).status).toBe(200);
  });
});
