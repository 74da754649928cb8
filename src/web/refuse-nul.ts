import { CertdeskError } from '../core/index.js';

// PostgreSQL stores no U+0000 in text (SQLSTATE 22021) nor in jsonb (22P05), and no name, token,
// CSR or address of this service has a use for it. A NUL anywhere in what a client sends is
// refused before any route runs, on SQLite as on PostgreSQL, so the two answer alike.

/** Where a request's client-supplied text comes from, as Fastify has parsed it. */
export interface RequestParts {
  readonly params?: unknown;
  readonly query?: unknown;
  readonly body?: unknown;
}

/**
 * The parts looked at, in order, and how a message names a member of each. Made once: functions
 * made per request cost every request their allocation (and, compiled by tsx, a name set on each).
 */
const PARTS = [
  { part: 'params', whole: 'path', named: (f: string) => `The path parameter ${f}` },
  { part: 'query', whole: 'query', named: (f: string) => `The query parameter ${f}` },
  { part: 'body', whole: 'body', named: (f: string) => f },
] as const;

/**
 * Throws CertdeskError `invalidInput` (ErrorField: the member's path, as schema errors name it,
 * e.g. `Contacts.0.Email`, a query parameter or a path parameter) when any string of the path
 * parameters, the query or the parsed body, member names included, holds U+0000. Changes nothing.
 */
export function refuseNul(parts: RequestParts): void {
  for (const { part, whole, named } of PARTS) {
    const at = nulPath(parts[part]);
    if (at === undefined) continue;
    // A NUL in a member name, or a body that is one string: the whole part is named.
    const field = at.length > 0 ? at.join('.') : whole;
    const what = at.length > 0 ? named(field) : `The request ${whole}`;
    throw new CertdeskError('invalidInput', `${what} must not contain a NUL character (U+0000).`, { field });
  }
}

/** A member's path, linked to its parent's (no copying per level: bodies may nest deep). */
interface Trail {
  readonly key: string;
  readonly parent: Trail | undefined;
}

const spell = (trail: Trail | undefined): string[] => {
  const out: string[] = [];
  for (let t = trail; t !== undefined; t = t.parent) out.unshift(t.key);
  return out;
};

/**
 * The path to the first string holding U+0000 (for a member name: its parent's path), else
 * undefined. Iterative: a body may nest deeper than the call stack goes.
 */
export function nulPath(value: unknown): readonly string[] | undefined {
  const stack: [unknown, Trail | undefined][] = [[value, undefined]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [v, trail] = next;
    if (typeof v === 'string') {
      if (v.includes('\0')) return spell(trail);
      continue;
    }
    if (v === null || typeof v !== 'object' || Buffer.isBuffer(v)) continue;
    const members = Object.entries(v);
    // Pushed in reverse, so that the first member is looked at first.
    for (let i = members.length - 1; i >= 0; i--) {
      const [key, member] = members[i]!;
      if (key.includes('\0')) return spell(trail);
      stack.push([member, { key, parent: trail }]);
    }
  }
  return undefined;
}
