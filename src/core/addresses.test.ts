import { describe, expect, it } from 'vitest';
import { addressGroup, isPublicAddress } from './addresses.js';

// The address rule of every outbound fetch certdesk makes for a customer's name (DCV, scans).
describe('isPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '100.64.0.1',
    '169.254.1.1',
    '0.0.0.0',
    '255.255.255.255',
    '224.0.0.1',
    '192.0.2.1',
    '198.51.100.1',
    '203.0.113.1',
    '198.18.0.1',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd12::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::a00:1',
    '64:ff9b::127.0.0.1',
    '2001:db8::1',
    '::',
    'ff02::1',
    '2002:a00:1::1',
    '2002:c000:0201::1',
    '3fff::1',
    'fe80::1%eth0',
    'not-an-ip',
    '',
    '127.1',
    '1.2.3.4.5',
  ])('%s → false', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2a00:1450:4001:82b::200e',
    '172.32.0.1',
    '100.128.0.1',
  ])('%s → true', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('addressGroup', () => {
  it.each([
    ['192.0.2.7', '192.0.2.7'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('%s → %s', (address, group) => {
    expect(addressGroup(address)).toBe(group);
  });
});
