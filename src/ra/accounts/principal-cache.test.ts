import { describe, expect, it } from 'vitest';
import { customerId, userId, type Principal } from '../../core/index.js';
import { PrincipalCache } from './principal-cache.js';

const principal = (expiresAt: number): Principal => ({
  customerId: customerId(1),
  userId: userId(2),
  applicationId: null,
  scopes: ['read'],
  roles: ['ADMIN'],
  authType: 'API',
  expiresAt,
  account: { currency: 'EUR', country: 'DE', locale: 'de_DE', timezone: 'UTC' },
});

describe('PrincipalCache', () => {
  it('ok/serves an entry until its time to live runs out', () => {
    const cache = new PrincipalCache(5000);
    cache.set('h', principal(10_000), 1_000_000);
    expect(cache.get('h', 1_004_999)).toBeDefined();
    expect(cache.get('h', 1_005_000)).toBeUndefined();
  });

  it('fail/never serves a token past its own expiry', () => {
    const cache = new PrincipalCache(60_000);
    cache.set('h', principal(1001), 1_000_000);
    expect(cache.get('h', 1_000_999)).toBeDefined();
    expect(cache.get('h', 1_001_000)).toBeUndefined();
  });

  it('ok/clear forgets everything; ttl 0 caches nothing; the oldest entry goes first when full', () => {
    const cache = new PrincipalCache(5000, 2);
    cache.set('a', principal(1e9), 0);
    cache.set('b', principal(1e9), 0);
    cache.set('c', principal(1e9), 0);
    expect(cache.get('a', 1)).toBeUndefined();
    expect(cache.get('c', 1)).toBeDefined();
    cache.clear();
    expect(cache.get('c', 1)).toBeUndefined();
    const off = new PrincipalCache(0);
    off.set('x', principal(1e9), 0);
    expect(off.get('x', 0)).toBeUndefined();
  });
});
