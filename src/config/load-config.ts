import { readFileSync } from 'node:fs';
import { SCHEMA, type Config, type Key } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Reads and validates the configuration from `env` (process.env by default) once.
 * Returns a frozen object; throws ConfigError listing every bad key.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(SCHEMA) as [string, Key<unknown>][]) {
    let raw = env[key.env];
    const fileVar = `${key.env}_FILE`;
    if (key.fileable === true && env[fileVar] !== undefined && env[fileVar] !== '') {
      if (raw !== undefined && raw !== '') problems.push(`${key.env} and ${fileVar} are both set: use one`);
      try {
        raw = readFileSync(env[fileVar], 'utf8').trim();
      } catch (e) {
        problems.push(`${fileVar}: cannot read ${env[fileVar]}: ${(e as Error).message}`);
        continue;
      }
    }
    if (raw === undefined || (raw === '' && key.default === undefined)) raw = key.default;
    if (raw === undefined) {
      out[name] = undefined;
      continue;
    }
    const value = key.parse(raw);
    if (value !== null && typeof value === 'object' && 'problem' in value)
      problems.push(`${key.env}: ${String(value.problem)}`);
    else out[name] = value;
  }
  // Unknown CERTDESK_* names are most likely typos: refuse them rather than ignore them.
  const known = new Set(Object.values(SCHEMA).flatMap((k: Key<unknown>) => [k.env, `${k.env}_FILE`]));
  for (const name of Object.keys(env)) {
    if (name.startsWith('CERTDESK_') && !name.startsWith('CERTDESK_TEST_') && !known.has(name))
      problems.push(`${name}: unknown setting`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  if (out.publicUrl === undefined) out.publicUrl = `http://${hostForUrl(out.host as string)}:${String(out.port)}`;
  return Object.freeze(out) as Config;
}

function hostForUrl(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
