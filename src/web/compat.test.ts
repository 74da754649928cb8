import { describe, expect, it } from 'vitest';
import { applyAliases, canonicalUrl } from './compat.js';

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
    ['/rest/v1/VulnerabiltyAssessment/', '/rest/v1/VulnerabilityAssessment/'],
    ['/rest/v1/VulnerabiltyAssessmentRescan/12?x=1', '/rest/v1/VulnerabilityAssessmentRescan/12?x=1'],
    ['/rest/v1/VulnerabiltyAssessmentX', '/rest/v1/VulnerabiltyAssessmentX'],
    ['/rest/v1/GetModifiedOrdersX', '/rest/v1/GetModifiedOrdersX'],
    ['/rest/v1/Profile', '/rest/v1/Profile'],
  ])('%s → %s', (from, to) => {
    expect(canonicalUrl(from)).toBe(to);
  });
});
