// Vitest global setup: the CA keys every test shares, made once per run (test/support/ca-fixture.ts).
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { writeCaKeyFixture } from './support/ca-fixture-file.js';

export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), 'certdesk-ca-keys-'));
  project.provide('caKeyFixture', await writeCaKeyFixture(dir));
  return () => rmSync(dir, { recursive: true, force: true });
}
