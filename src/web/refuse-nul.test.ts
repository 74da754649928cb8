import { describe, expect, it } from 'vitest';
import { CertdeskError } from '../core/index.js';
import { nulPath, refuseNul } from './refuse-nul.js';

describe('refuseNul', () => {
  it.each([
    ['ok/no NUL anywhere', { params: { id: '7' }, query: { a: ['x', 'y'] }, body: { a: [{ b: 'c' }], n: 1 } }],
    ['ok/nothing at all', {}],
    ['ok/a Buffer body (OCSP) is not text', { body: Buffer.from([0, 1, 0]) }],
  ])('%s', (_name, parts) => {
    expect(() => refuseNul(parts)).not.toThrow();
  });

  it.each([
    ['fail/path parameter', { params: { UsernameOrId: 'a\0b' } }, 'UsernameOrId', 'The path parameter UsernameOrId'],
    [
      'fail/query parameter, repeated',
      { query: { CommonName: ['ok', 'a\0b'] } },
      'CommonName.1',
      'The query parameter CommonName.1',
    ],
    [
      'fail/nested body member',
      { body: { Contacts: [{ Email: 'x' }, { Email: 'a\0' }] } },
      'Contacts.1.Email',
      'Contacts.1.Email',
    ],
    ['fail/a body member name', { body: { a: { 'b\0': 1 } } }, 'a', 'a'],
    ['fail/a top-level member name', { body: { '\0': 1 } }, 'body', 'The request body'],
    ['fail/a body that is one string', { body: '\0' }, 'body', 'The request body'],
    ['fail/the path before the body', { params: { x: '\0' }, body: { y: '\0' } }, 'x', 'The path parameter x'],
  ])('%s', (_name, parts, field, subject) => {
    let thrown: unknown;
    try {
      refuseNul(parts);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(CertdeskError);
    expect(thrown).toMatchObject({
      kind: 'invalidInput',
      field,
      message: `${subject} must not contain a NUL character (U+0000).`,
    });
  });

  it('ok/a body nested deeper than the call stack goes is walked without overflowing', () => {
    let deep: unknown = 'a\0';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(nulPath(deep)?.length).toBe(200_000);
  });
});
