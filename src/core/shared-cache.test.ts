import { describe, expect, it } from 'vitest';
import { SharedCache, type CacheBroadcast } from './shared-cache.js';

/** Two processes' broadcasts on one bus: what one publishes, both hear. */
function bus(): () => CacheBroadcast {
  const listeners = new Map<string, (() => void)[]>();
  return () => ({
    publish: async (topic) => {
      for (const fn of listeners.get(topic) ?? []) fn();
    },
    subscribe: (topic, fn) => listeners.set(topic, [...(listeners.get(topic) ?? []), fn]),
  });
}

describe('SharedCache', () => {
  it('ok/keeps at most maxEntries, dropping the oldest first', () => {
    const c = new SharedCache<number>('t', 2);
    c.set('a', 1);
    c.set('b', 2);
    c.set('a', 10); // an update is not a new entry
    c.set('c', 3);
    expect([c.get('a'), c.get('b'), c.get('c')]).toEqual([10, undefined, 3]);
  });

  it('fail/a value read before a clear is not cached after it', async () => {
    const c = new SharedCache<string>('t');
    const epoch = c.epoch;
    await c.clear();
    c.set('k', 'stale', epoch);
    expect(c.get('k')).toBeUndefined();
    c.set('k', 'fresh', c.epoch);
    expect(c.get('k')).toBe('fresh');
  });

  it('ok/a clear in one process empties the caches of the same topic in every process, and no other topic', async () => {
    const connect = bus();
    const [here, there, other] = [
      new SharedCache<number>('t'),
      new SharedCache<number>('t'),
      new SharedCache<number>('u'),
    ];
    here.connect(connect());
    there.connect(connect());
    other.connect(connect());
    for (const c of [here, there, other]) c.set('k', 1);
    const epochThere = there.epoch;
    await here.clear();
    expect([here.get('k'), there.get('k'), other.get('k')]).toEqual([undefined, undefined, 1]);
    // A read that began in the other process before the clear is not kept there either.
    there.set('k', 2, epochThere);
    expect(there.get('k')).toBeUndefined();
  });
});
