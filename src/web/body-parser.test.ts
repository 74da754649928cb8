import { describe, expect, it } from 'vitest';
import { parseBody } from './body-parser.js';

describe('parseBody', () => {
  it.each([
    ['ok/plain JSON', '{"a":1}', 'application/json', { a: 1 }],
    ['ok/empty body', '', 'application/json', undefined],
    ['ok/whitespace body', '  \n', 'application/json', undefined],
    ['ok/JSON labelled as form', '{}', 'application/x-www-form-urlencoded', {}],
    [
      'ok/real form',
      'grant_type=client_credentials&scope=read%20order',
      'application/x-www-form-urlencoded',
      { grant_type: 'client_credentials', scope: 'read order' },
    ],
    [
      'ok/raw line breaks inside a string',
      '{"CSR":"-----BEGIN\nAB\r\nCD\t-----"}',
      'application/json',
      { CSR: '-----BEGIN\nAB\r\nCD\t-----' },
    ],
    ['ok/escaped slashes', '{"a":"x\\/y"}', 'application/json', { a: 'x/y' }],
    ['ok/no content type', '{"a":true}', undefined, { a: true }],
    ['ok/escaped quote before a raw line break', '{"a":"q\\"\nz"}', 'application/json', { a: 'q"\nz' }],
  ])('%s', (_name, text, type, expected) => {
    expect(parseBody(text, type)).toEqual(expected);
  });

  it.each([
    ['fail/truncated JSON', '{"a":'],
    ['fail/not JSON', 'hello'],
    ['fail/trailing garbage', '{"a":1}x'],
    ['fail/prototype poisoning', '{"a":1,"__proto__":{"admin":true}}'],
    ['fail/constructor poisoning', '{"constructor":{"prototype":{"admin":true}}}'],
  ])('%s', (_name, text) => {
    expect(() => parseBody(text, 'application/json')).toThrow(SyntaxError);
  });
});
