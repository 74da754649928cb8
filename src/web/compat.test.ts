import { describe, expect, it } from 'vitest';
import { applyAliases, canonicalUrl, commaList, normalizeDomainApprovers, parseBoolish } from './compat.js';

describe('parseBoolish', () => {
  it.each([
    [true, true], ['true', true], ['True', true], ['TRUE', true], ['1', true], [1, true],
    [false, false], ['false', false], ['False', false], ['0', false], [0, false],
    ['yes', undefined], ['', undefined], [2, undefined], [null, undefined], [{}, undefined],
  ])('%j → %j', (input, expected) => {
    expect(parseBoolish(input)).toBe(expected);
  });
});

describe('commaList', () => {
  it('splits Status=COMPLETE,PENDING and repeated parameters alike', () => {
    expect(commaList('COMPLETE,PENDING')).toEqual(['COMPLETE', 'PENDING']);
    expect(commaList(['COMPLETE', 'PENDING, REVOKED'])).toEqual(['COMPLETE', 'PENDING', 'REVOKED']);
    expect(commaList(undefined)).toEqual([]);
    expect(commaList(' , ')).toEqual([]);
  });
});

describe('applyAliases', () => {
  it('ignores non-objects', () => {
    expect(() => applyAliases(null)).not.toThrow();
    expect(() => applyAliases([1])).not.toThrow();
    expect(() => applyAliases('x')).not.toThrow();
  });
});

describe('canonicalUrl', () => {
  it.each([
    ['/rest/v1/GetModifiedOrders?FromDate=x', '/rest/v1/ModifiedOrders?FromDate=x'],
    ['/rest/v1/GetModifiedOrders', '/rest/v1/ModifiedOrders'],
    ['/rest/v1/VulnerabiltyAssessment', '/rest/v1/VulnerabilityAssessment'],
    ['/rest/v1/VulnerabiltyAssessmentRescan/42', '/rest/v1/VulnerabilityAssessmentRescan/42'],
    ['/rest/v1/GetModifiedOrdersX', '/rest/v1/GetModifiedOrdersX'],
    ['/rest/v1/Profile', '/rest/v1/Profile'],
  ])('%s → %s', (from, to) => {
    expect(canonicalUrl(from)).toBe(to);
  });
});

describe('normalizeDomainApprovers', () => {
  const expected = [{ Domain: 'example.org', Approvers: ['admin@example.org', 'hostmaster@example.org'] }];
  it('ok/{DomainApprover:[…]} with string approvers', () => {
    expect(normalizeDomainApprovers({ DomainApprover: [{ Domain: 'example.org', Approvers: ['admin@example.org', 'hostmaster@example.org'] }] })).toEqual(expected);
  });
  it('ok/a bare array with approver objects', () => {
    expect(normalizeDomainApprovers([{ Domain: 'example.org', Approvers: [{ ApproverEmail: 'admin@example.org', ApproverType: 'Generic' }, 'hostmaster@example.org'] }])).toEqual(expected);
  });
  it.each([[null], ['x'], [{}], [[{ Domain: 1, Approvers: [] }]], [[{ Domain: 'a', Approvers: [{}] }]]])('fail/%j', (value) => {
    expect(normalizeDomainApprovers(value)).toBeUndefined();
  });
});
