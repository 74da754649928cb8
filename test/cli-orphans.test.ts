// `certdesk ca orphans [--revoke]` against a database holding one certificate no order delivered.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { caFixtureDataDir } from './support/ca-fixture.js';
import { loadConfig } from '../src/config/index.js';
import { customerId, orderId as toOrderId } from '../src/core/index.js';
import { createServices, createWebApp } from '../src/main.js';
import { testCsr } from './support/csr.js';
import { signForOrder } from './support/stray-certificates.js';

const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;
const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };

// Each test starts several certdesk processes one after another: bounded generously, as CI may run on a loaded machine.
describe('certdesk ca orphans', { timeout: 180_000 }, () => {
  it('ok/lists a certificate signed for an order that no issuance delivered, revokes it with --revoke, and the metric follows', async () => {
    const dir = await caFixtureDataDir('cli-orphans-');
    const vars = { CERTDESK_DATA_DIR: dir, CERTDESK_DNS_SERVERS: '127.0.0.1:9' };
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_'))),
      ...vars,
    };
    const cli = async (args: string[]) => (await run(BIN, args, { env })).stdout;

    // An order waiting for its DNS proof, and a certificate signed for it outside any issuance round.
    const services = await createServices(loadConfig(vars));
    await services.ca.init();
    const created = await services.accounts.createCustomer({
      name: 'Orphans',
      email: 'ops@customer.example',
      currency: 'EUR',
      creditLimit: 100000,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'Europe/Berlin',
    });
    const app = await createWebApp(services, false);
    const token = (
      await services.oauth.token(
        { grantType: 'client_credentials', clientId: created.application.clientId, clientSecret: created.clientSecret },
        null,
      )
    ).access_token;
    const placed = await app.inject({
      method: 'POST',
      url: '/rest/v1/Order',
      headers: { authorization: `Bearer ${token}` },
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    expect(placed.statusCode, placed.body).toBe(200);
    const orderId = placed.json().ServiceOrderID as number;
    const stray = await signForOrder(
      services,
      { id: toOrderId(orderId), customerId: customerId(created.customer.id) },
      { names: ['www.certdesk-test.com'] },
    );
    const metric = async () =>
      /certdesk_orphan_certificates (\d+)/.exec((await app.inject({ method: 'GET', url: '/metrics' })).body)?.[1];
    expect(await metric()).toBe('1');

    const listed = JSON.parse(await cli(['ca', 'orphans', '--json'])) as {
      Orphans: { Serial: string; ServiceOrderID: number; CustomerID: number }[];
      Revoked: boolean;
    };
    expect(listed).toEqual({
      Orphans: [
        expect.objectContaining({ Serial: stray.serial, ServiceOrderID: orderId, CustomerID: created.customer.id }),
      ],
      Revoked: false,
    });
    expect(await cli(['ca', 'orphans'])).toContain(`${stray.serial}\torder ${orderId}`);

    const revoked = JSON.parse(await cli(['ca', 'orphans', '--revoke', '--json'])) as {
      Orphans: { Serial: string }[];
      Revoked: boolean;
    };
    expect(revoked).toMatchObject({ Orphans: [{ Serial: stray.serial }], Revoked: true });
    expect(await cli(['ca', 'orphans'])).toBe('no orphan certificates found\n');
    expect(await metric()).toBe('0');
    const row = await services.db.kysely
      .selectFrom('certificates')
      .select(['revoked_at', 'revocation_reason'])
      .where('serial', '=', stray.serial)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ revocation_reason: 4 });
    expect(row.revoked_at).not.toBeNull();
    const audit = await services.db.kysely
      .selectFrom('audit_events')
      .select(['actor', 'subject'])
      .where('action', '=', 'ca.orphan-revoked')
      .execute();
    expect(audit).toEqual([{ actor: 'operator', subject: String(orderId) }]);
    await app.close();
    await services.close();
  }, 120_000);
});
