import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { accessDoc, configurationDoc, errorsDoc } from '../scripts/docs-content.js';

describe('generated docs', () => {
  it('docs/errors.md is current (run `npm run docs:errors`)', () => {
    expect(readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8')).toBe(errorsDoc());
  });
  it('docs/configuration.md is current (run `npm run docs:errors`)', () => {
    expect(readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8')).toBe(configurationDoc());
  });
  it('docs/access.md is current (run `npm run docs:errors`)', async () => {
    expect(readFileSync(new URL('../docs/access.md', import.meta.url), 'utf8')).toBe(await accessDoc());
  });
});
