// Gathering on its own: which calls go together, and how each is answered.
import { describe, expect, it } from 'vitest';
import { Gathering } from './gathering.js';

describe('Gathering', () => {
  const recorder = () => {
    const runs: (string | number[])[] = [];
    return {
      runs,
      one: async (n: number) => {
        runs.push(`one ${n}`);
        return n * 10;
      },
      many: async (ns: readonly number[]) => {
        runs.push([...ns]);
        return ns.map((n) => n * 10);
      },
    };
  };

  it('ok/a call alone runs as one; calls of one turn run as one set, each answered with its own', async () => {
    const g = new Gathering();
    const r = recorder();
    expect(await g.run('k', 1, r.one, r.many)).toBe(10);
    expect(await Promise.all([2, 3, 4].map((n) => g.run('k', n, r.one, r.many)))).toEqual([20, 30, 40]);
    expect(r.runs).toEqual(['one 1', [2, 3, 4]]);
  });

  it('ok/kinds are gathered apart, and a later turn starts a new gathering', async () => {
    const g = new Gathering();
    const r = recorder();
    const first = [g.run('a', 1, r.one, r.many), g.run('b', 2, r.one, r.many), g.run('a', 3, r.one, r.many)];
    await Promise.all(first);
    await g.run('a', 5, r.one, r.many);
    expect(r.runs).toEqual([[1, 3], 'one 2', 'one 5']);
  });

  it('fail/a failed set fails every call in it; a set answered with the wrong count fails too', async () => {
    const g = new Gathering();
    const boom = new Error('boom');
    const failing = Promise.allSettled(
      [1, 2].map((n) =>
        g.run(
          'k',
          n,
          async () => 0,
          async () => {
            throw boom;
          },
        ),
      ),
    );
    expect(await failing).toEqual([
      { status: 'rejected', reason: boom },
      { status: 'rejected', reason: boom },
    ]);
    const short = Promise.allSettled(
      [1, 2].map((n) =>
        g.run(
          'k',
          n,
          async () => 0,
          async () => [1],
        ),
      ),
    );
    expect((await short).map((s) => s.status)).toEqual(['rejected', 'rejected']);
  });

  it('bad input/a `one` that throws at once rejects its call, not the caller', async () => {
    const g = new Gathering();
    const p = g.run(
      'k',
      1,
      () => {
        throw new Error('at once');
      },
      async () => [],
    );
    await expect(p).rejects.toThrow('at once');
  });
});
