import { describe, expect, it } from 'vitest';
import { Limiter } from './limiter.js';

describe('Limiter', () => {
  it('ok/never runs more than max at once, runs every task, keeps each result', async () => {
    const limiter = new Limiter(3);
    let running = 0;
    let most = 0;
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        limiter.run(async () => {
          running++;
          most = Math.max(most, running);
          await new Promise((r) => setTimeout(r, i % 3));
          running--;
          return i;
        }),
      ),
    );
    expect(most).toBe(3);
    expect(results).toEqual(Array.from({ length: 40 }, (_, i) => i));
  });

  it('fail/a task that throws frees its place', async () => {
    const limiter = new Limiter(1);
    await expect(limiter.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await limiter.run(async () => 'next')).toBe('next');
  });
});
