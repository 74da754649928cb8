// GroupCommit: what is added in one tick is written together; at most maxInFlight writes at once,
// and what comes while all are busy waits and goes in the next one.
import { describe, expect, it } from 'vitest';
import { GroupCommit } from './group-commit.js';

/** A write that holds each batch until released, recording the batches. */
function heldWrites() {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  const write = (items: number[]) => {
    batches.push(items);
    return new Promise<void>((resolve) => releases.push(resolve));
  };
  return { batches, releases, write };
}

/** A few turns of the event loop: a settled write's follow-up (its `finally`, the next flush) has run. */
const tick = async () => {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('GroupCommit', () => {
  it('ok/items added in one tick are written by one call', async () => {
    const w = heldWrites();
    const commit = new GroupCommit(w.write);
    const added = [1, 2, 3].map((i) => commit.add(i));
    await tick();
    expect(w.batches).toEqual([[1, 2, 3]]);
    w.releases[0]!();
    await Promise.all(added);
  });

  it('ok/one write in flight (the default): items that come meanwhile wait, then go together', async () => {
    const w = heldWrites();
    const commit = new GroupCommit(w.write);
    const first = commit.add(1);
    await tick();
    const later = [commit.add(2), commit.add(3)];
    await tick();
    expect(w.batches).toEqual([[1]]);
    w.releases[0]!();
    await first;
    await tick();
    expect(w.batches).toEqual([[1], [2, 3]]);
    w.releases[1]!();
    await Promise.all(later);
    await commit.idle();
  });

  it('ok/two writes in flight: the second is written at once, the third waits for either', async () => {
    const w = heldWrites();
    const commit = new GroupCommit(w.write, 500, 2);
    const a = commit.add(1);
    await tick();
    const b = commit.add(2);
    await tick();
    expect(w.batches).toEqual([[1], [2]]);
    const c = [commit.add(3), commit.add(4)];
    await tick();
    expect(w.batches).toHaveLength(2);
    w.releases[1]!();
    await b;
    await tick();
    expect(w.batches).toEqual([[1], [2], [3, 4]]);
    w.releases[0]!();
    w.releases[2]!();
    await Promise.all([a, ...c]);
    await commit.idle();
  });

  it('fail/an item the write refuses rejects alone; a write that throws rejects its whole batch', async () => {
    const refusing = new GroupCommit(async (items: number[]) =>
      items.map((i) => (i === 2 ? new Error('no 2') : undefined)),
    );
    const results = await Promise.allSettled([1, 2, 3].map((i) => refusing.add(i)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const failing = new GroupCommit(async () => {
      throw new Error('disk full');
    });
    const all = await Promise.allSettled([failing.add(1), failing.add(2)]);
    expect(all).toEqual([
      { status: 'rejected', reason: new Error('disk full') },
      { status: 'rejected', reason: new Error('disk full') },
    ]);
  });
});
