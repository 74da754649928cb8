// bin/certdesk starts Node with the service's flags (src/run.ts NODE_FLAGS); the benchmark's
// servers take the same list, so what it measures is what `certdesk serve` runs.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../src/run.js';

const BIN = new URL('../bin/certdesk', import.meta.url).pathname;

describe('the Node flags of certdesk processes', () => {
  it('bin/certdesk passes NODE_FLAGS on its first line', () => {
    expect(readFileSync(BIN, 'utf8').split('\n')[0]).toBe(`#!/usr/bin/env -S node ${NODE_FLAGS.join(' ')}`);
  });

  it('a process started through bin/certdesk runs with them', { timeout: 60_000 }, async () => {
    // A preload prints the flags the process was started with, then the command runs as usual.
    const probe = `data:text/javascript,process.stderr.write('execArgv='+JSON.stringify(process.execArgv)+'\\n')`;
    const { stderr, stdout } = await promisify(execFile)(BIN, ['--help'], {
      env: { ...process.env, NODE_OPTIONS: `--import=${probe}` },
    });
    expect(stdout).toContain('Usage');
    const execArgv = JSON.parse(/execArgv=(.*)/.exec(stderr)![1]!) as string[];
    for (const flag of NODE_FLAGS) expect(execArgv).toContain(flag);
  });
});
