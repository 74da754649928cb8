// A server under test, run in its own process: `node --import tsx bench/server.ts <baseline|certdesk>`.
// Started by bench/run.ts with fork(): it listens on 127.0.0.1:0 and reports its port over IPC.
// The certdesk server is the real one (createServices + createWebApp over a fresh SQLite file);
// the baseline is a bare Fastify 5 app with one JSON route. Exits on SIGTERM/SIGINT or when the
// parent goes away (IPC disconnect), removing its temporary data.
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Fastify from 'fastify';
import { loadConfig } from '../src/config/index.js';
import { X509Certificate } from 'node:crypto';
import { checkCsr } from '../src/ca/index.js';
import { certIdFor } from '../src/ca/ocsp.js';
import { seq } from '../src/ca/der-writer.js';
import { children, readTlv } from '../src/core/der.js';
import { createServices, createWebApp, type Services } from '../src/main.js';
import { generateKeyAndCsr } from '../src/validation/keygen.js';
import type { ChildMessage, ParentMessage, ServerKind } from './protocol.js';

/** High enough that the limiter never refuses a benchmark request; it still runs on each one. */
const BENCH_RATE_LIMIT = '100000000';

interface Running {
  port: number;
  credentials?: { clientId: string; clientSecret: string };
  ocspPath?: string;
  close(): Promise<void>;
}

async function startBaseline(): Promise<Running> {
  const app = Fastify({ logger: false });
  app.get('/', async () => ({ hello: 'world' }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: portOf(app.server.address()), close: () => app.close() };
}

async function startCertdesk(): Promise<Running> {
  const dataDir = mkdtempSync(join(tmpdir(), 'certdesk-bench-'));
  try {
    const config = loadConfig({
      CERTDESK_DATA_DIR: dataDir,
      CERTDESK_RATE_LIMIT: BENCH_RATE_LIMIT,
    });
    const services = await createServices(config);
    const app = await createWebApp(services, false);
    const created = await services.accounts.createCustomer({
      name: 'Bench Customer', email: 'ops@bench.example', currency: 'EUR', creditLimit: 5000,
      country: 'DE', locale: 'de_DE', timezone: 'Europe/Berlin',
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    return {
      port: portOf(app.server.address()),
      credentials: { clientId: created.application.clientId, clientSecret: created.clientSecret },
      ocspPath: await ocspFixture(services),
      async close() {
        await app.close();
        await services.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    rmSync(dataDir, { recursive: true, force: true });
    throw e;
  }
}

/** Makes the CA (small RSA keys: only the OCSP answer is measured), issues one leaf and returns its OCSP GET path. */
async function ocspFixture(services: Services): Promise<string> {
  await services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
  const { csrPem } = await generateKeyAndCsr('ocsp.certdesk-bench.com');
  const leaf = await services.ca.issue({
    csr: checkCsr(csrPem), product: { code: 'TrustPoint.DV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'DV' }, dnsNames: ['ocsp.certdesk-bench.com'],
  });
  const issuer = new X509Certificate(leaf.intermediate);
  const certId = certIdFor(subjectDer(issuer.raw), issuer.publicKey.export({ type: 'spki', format: 'der' }), Buffer.from(leaf.serial, 'hex'));
  // OCSPRequest { TBSRequest { requestList { Request { CertID } } } }
  const request = seq(seq(seq(seq(certId))));
  return `/ocsp/${encodeURIComponent(Buffer.from(request).toString('base64'))}`;
}

/** The subject Name (DER) of a certificate. */
function subjectDer(der: Uint8Array): Uint8Array {
  const [tbs] = children(der, readTlv(der, 0));
  const fields = children(der, tbs!);
  const subject = fields[fields[0]!.tag === 0xa0 ? 5 : 4]!;
  return der.subarray(subject.start, subject.end);
}

function portOf(address: AddressInfo | string | null): number {
  if (address === null || typeof address === 'string') throw new Error(`unexpected listen address: ${String(address)}`);
  return address.port;
}

function send(message: ChildMessage): void {
  if (process.connected) process.send?.(message);
}

async function main(): Promise<void> {
  const kind = process.argv[2] as ServerKind | undefined;
  if (kind !== 'baseline' && kind !== 'certdesk') throw new Error(`usage: server.ts <baseline|certdesk> (got ${String(kind)})`);
  if (process.send === undefined) throw new Error('server.ts is started by bench/run.ts (it needs an IPC channel)');

  // Stop requests may come while the server is still starting: they wait for the start.
  const starting = kind === 'baseline' ? startBaseline() : startCertdesk();
  let profiler: Session | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (code: number) => {
    stopping ??= (async () => {
      try {
        profiler?.disconnect();
        await (await starting).close();
      } catch (e) {
        process.stderr.write(`bench server: stop failed: ${(e as Error).stack ?? String(e)}\n`);
        code = 1;
      } finally {
        process.exit(code);
      }
    })();
    return stopping;
  };
  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));
  process.once('disconnect', () => void stop(0));

  process.on('message', (message: ParentMessage) => {
    void (async () => {
      try {
        switch (message.type) {
          case 'usage': {
            const cpu = process.cpuUsage();
            const elu = performance.eventLoopUtilization();
            send({ type: 'usage', id: message.id, cpuMicros: cpu.user + cpu.system, eluActive: elu.active, eluIdle: elu.idle });
            break;
          }
          case 'profile-start':
            profiler = new Session();
            profiler.connect();
            await profiler.post('Profiler.enable');
            await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
            await profiler.post('Profiler.start');
            send({ type: 'ack', id: message.id });
            break;
          case 'profile-stop': {
            if (profiler === undefined) throw new Error('the profiler was not started');
            const { profile } = await profiler.post('Profiler.stop');
            writeFileSync(message.file, JSON.stringify(profile));
            profiler.disconnect();
            profiler = undefined;
            send({ type: 'ack', id: message.id });
            break;
          }
        }
      } catch (e) {
        send({ type: 'error', id: 'id' in message ? message.id : undefined, message: (e as Error).stack ?? String(e) });
      }
    })();
  });

  const running = await starting;
  if (stopping === undefined) {
    send({ type: 'ready', port: running.port, ...(running.credentials === undefined ? {} : { credentials: running.credentials }), ...(running.ocspPath === undefined ? {} : { ocspPath: running.ocspPath }) });
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench server failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
