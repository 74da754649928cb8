import { describe, expect, it, vi } from 'vitest';
import { checkPhaseBatches, duringHandover } from './check-phase.js';

describe('checkPhaseBatches', () => {
  it('hands the items of one turn over as one batch, after the turn', async () => {
    const batches: number[][] = [];
    const add = checkPhaseBatches<number>((b) => batches.push(b));
    add(1);
    add(2);
    await Promise.resolve();
    add(3);
    expect(batches).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('puts what a batch queues into the next batch, a turn later', async () => {
    const batches: string[][] = [];
    const add = checkPhaseBatches<string>((b) => {
      batches.push(b);
      if (b.includes('first')) add('queued by the first batch');
    });
    add('first');
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([['first']]);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([['first'], ['queued by the first batch']]);
  });

  it("is not stalled by a test's fake timers", async () => {
    vi.useFakeTimers();
    try {
      const add = checkPhaseBatches<() => void>((b) => b.forEach((f) => f()));
      // Fake timers replaced the global setImmediate: never advanced, it would never fire.
      await new Promise<void>((resolve) => add(resolve));
    } finally {
      vi.useRealTimers();
    }
  });

  it('tells the code a batch sets off that it runs during the handover, until the next turn', async () => {
    const seen: [string, boolean][] = [];
    const add = checkPhaseBatches<() => void>((b) => b.forEach((f) => f()));
    // Past any handover an earlier test's batch left running.
    await new Promise((r) => setImmediate(r));
    seen.push(['before', duringHandover()]);
    await new Promise<void>((resolve) => add(resolve));
    seen.push(['continuation', duringHandover()]);
    await Promise.resolve();
    await Promise.resolve();
    seen.push(['a later continuation', duringHandover()]);
    await new Promise((r) => setImmediate(r));
    seen.push(['the next turn', duringHandover()]);
    expect(seen).toEqual([
      ['before', false],
      ['continuation', true],
      ['a later continuation', true],
      ['the next turn', false],
    ]);
  });
});
