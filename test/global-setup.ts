// Vitest global setup, once per run: the CA keys every test shares (test/support/ca-fixture.ts),
// and on PostgreSQL the migrated database every test's database is copied from.
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { writeCaKeyFixture } from './support/ca-fixture-file.js';
import { migratedPostgresTemplate } from './support/databases.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'certdesk-ca-keys-'));
  project.provide('caKeyFixture', await writeCaKeyFixture(dir));
  // One migrated PostgreSQL database that each test's database copies (test/support/databases.ts).
  const pgUrl = process.env.CERTDESK_TEST_DATABASE_URL;
  const template = pgUrl === undefined || pgUrl === '' ? undefined : await migratedPostgresTemplate(pgUrl);
  project.provide('pgTemplate', template?.name);
  return async () => {
    rmSync(dir, { recursive: true, force: true });
    await template?.drop();
  };
}
