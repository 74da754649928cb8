// A command of the default install (SQLite, no Redis, no SMTP) does not load the packages only
// other setups need: each costs a process's start 80-150 ms (pg, ioredis, nodemailer, and
// @peculiar/x509 behind the key generator), and every CLI command is a process's start.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from './support/databases.js';

const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;
const LAZY = ['pg', 'ioredis', 'nodemailer', '@peculiar/x509'];

/** The packages among LAZY a `certdesk` command loaded (CommonJS modules, as all four are). */
async function packagesLoaded(args: string[], extra: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'certdesk-lazy-'));
  // A preload that lists, at exit, every CommonJS module the process loaded.
  const probe = join(dir, 'probe.cjs');
  writeFileSync(
    probe,
    "process.on('exit', () => process.stderr.write('loaded=' + JSON.stringify(Object.keys(require('node:module')._cache)) + '\\n'));",
  );
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));
  const { stderr } = await run(BIN, args, {
    env: { ...env, CERTDESK_DATA_DIR: dir, NODE_OPTIONS: `--require=${probe}`, ...extra },
  });
  const loaded = JSON.parse(/loaded=(.*)/.exec(stderr)![1]!) as string[];
  return LAZY.filter((name) => loaded.some((path) => path.includes(`/node_modules/${name}/`)));
}

describe('packages loaded on first use', { timeout: 120_000 }, () => {
  it('ok/a CLI command on SQLite loads none of pg, ioredis, nodemailer, @peculiar/x509', async () => {
    expect(await packagesLoaded(['customer', 'list', '--json'], {})).toEqual([]);
  });

  const pg = process.env.CERTDESK_TEST_DATABASE_URL;
  if (pg === undefined || pg === '') console.warn('PostgreSQL variant not run: CERTDESK_TEST_DATABASE_URL is not set');
  it.skipIf(pg === undefined || pg === '')('ok/the same command on PostgreSQL loads pg, and only it', async () => {
    const database = await scratchPostgresDatabase(pg!);
    try {
      expect(await packagesLoaded(['customer', 'list', '--json'], { CERTDESK_DATABASE_URL: database.url })).toEqual([
        'pg',
      ]);
    } finally {
      await database.drop();
    }
  });
});
