// A command of the default install (SQLite, no Redis, no SMTP) does not load the packages only
// other setups need: each costs a process's start 80-150 ms (pg, ioredis, nodemailer, and
// @peculiar/x509 behind the key generator), and every CLI command is a process's start.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from './support/databases.js';

const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;
const LAZY = ['pg', 'ioredis', 'nodemailer', '@peculiar/x509'];

/**
 * A preload that registers a resolve hook writing every module URL the process imports to
 * PROBE_OUT: our code imports each of the four packages from ES modules, whatever their format
 * (nodemailer is an ES module, the others CommonJS), so each import passes through it.
 */
const PROBE = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.PROBE_OUT, resolved.url + '\\\\n');
  return resolved;
}\`));
`;

describe('packages loaded on first use', { timeout: 120_000 }, () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** The packages among LAZY a `certdesk` command loaded. */
  async function packagesLoaded(args: string[], extra: Record<string, string>): Promise<string[]> {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-lazy-'));
    dirs.push(dir);
    const probe = join(dir, 'probe.mjs');
    const out = join(dir, 'imported.txt');
    writeFileSync(probe, PROBE);
    writeFileSync(out, '');
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));
    await run(BIN, args, {
      env: { ...env, CERTDESK_DATA_DIR: dir, NODE_OPTIONS: `--import=${probe}`, PROBE_OUT: out, ...extra },
    });
    const imported = readFileSync(out, 'utf8').split('\n');
    // The probe saw the command's own modules: it is not blind.
    expect(imported.some((url) => url.endsWith('/src/cli/main.ts'))).toBe(true);
    return LAZY.filter((name) => imported.some((url) => url.includes(`/node_modules/${name}/`)));
  }

  it('ok/a CLI command on SQLite loads none of pg, ioredis, nodemailer, @peculiar/x509', async () => {
    expect(await packagesLoaded(['customer', 'list', '--json'], {})).toEqual([]);
  });

  it('ok/with SMTP configured the same command loads nodemailer, and only it', async () => {
    const smtp = { CERTDESK_SMTP_URL: 'smtp://127.0.0.1:2525' };
    expect(await packagesLoaded(['customer', 'list', '--json'], smtp)).toEqual(['nodemailer']);
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
