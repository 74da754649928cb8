// /readyz asks each part for at most PROBE_MS: a load balancer's health check must be answered
// even when the database's path has gone silent and the statement's own bound
// (CERTDESK_DATABASE_QUERY_TIMEOUT_MS, 30 s by default) is far longer than the check's timeout.
// PostgreSQL is reached through a relay on loopback that forgets its flows (no FIN, no RST).
import { afterEach, describe, expect, it } from 'vitest';
import { PROBE_MS } from '../src/process-parts.js';
import { QUERY_TIMEOUT_MS } from '../src/storage/index.js';
import { createTestContext, type TestContext } from './support/app.js';
import { openPostgres } from './support/databases.js';
import { startTcpRelay, type TcpRelay } from './support/tcp-relay.js';

const PG = process.env.CERTDESK_TEST_DATABASE_URL;
if (PG === undefined || PG === '')
  console.warn('the readiness probe bound is not tested: it needs PostgreSQL (CERTDESK_TEST_DATABASE_URL is not set)');

describe.skipIf(PG === undefined || PG === '')("/readyz's bound on each probe", () => {
  let relay: TcpRelay | undefined;
  let t: TestContext | undefined;
  afterEach(async () => {
    // The probe's statement still waits on the dead path: closing the relay's sockets ends it, and the pool can close.
    relay?.closeAll();
    await t?.close();
    await relay?.close();
    relay = t = undefined;
  });

  it('fail/a database path gone silent: /readyz answers 503 "unreachable" after PROBE_MS, long before the statement bound', async () => {
    expect(QUERY_TIMEOUT_MS).toBeGreaterThanOrEqual(3 * PROBE_MS);
    relay = await startTcpRelay(new URL(PG!), 5432);
    const host = relay.host;
    t = await createTestContext({ dialect: 'postgres', open: () => openPostgres(PG!, host) });
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { database: 'ok' },
    });

    relay.forgetFlows();
    relay.blackholeNew = true;
    const started = Date.now();
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    const took = Date.now() - started;
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ checks: { database: 'unreachable' } });
    expect(took).toBeGreaterThanOrEqual(PROBE_MS - 50);
    // Answered by the probe's bound, not the statement's (30 s), with room for a loaded machine.
    expect(took).toBeLessThan(QUERY_TIMEOUT_MS - PROBE_MS);
  }, 60_000);
});
