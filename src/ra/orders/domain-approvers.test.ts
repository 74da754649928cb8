import { describe, expect, it } from 'vitest';
import { assignApprovers, coveringDomains, readDomainApprovers } from './domain-approvers.js';

describe('readDomainApprovers', () => {
  const expected = [{ domain: 'example.org', approvers: ['admin@example.org', 'hostmaster@example.org'] }];
  it('ok/{DomainApprover:[…]} with string approvers', () => {
    expect(
      readDomainApprovers({
        DomainApprover: [{ Domain: 'example.org', Approvers: ['admin@example.org', 'hostmaster@example.org'] }],
      }),
    ).toEqual(expected);
  });
  it('ok/a bare array with approver objects and strings mixed', () => {
    expect(
      readDomainApprovers([
        {
          Domain: 'Example.ORG',
          Approvers: [{ ApproverEmail: 'admin@example.org', ApproverType: 'Generic' }, 'hostmaster@example.org'],
        },
      ]),
    ).toEqual(expected);
  });
  it('ok/Approvers as one comma-separated string', () => {
    expect(
      readDomainApprovers([{ Domain: 'example.org', Approvers: 'admin@example.org, hostmaster@example.org' }]),
    ).toEqual(expected);
  });
  it.each([[null], ['x'], [{}], [5]])('fail/%j is in neither shape', (value) => {
    expect(readDomainApprovers(value)).toBeUndefined();
  });
  it('fail/items without a domain or an address come back empty, for the caller to report', () => {
    expect(readDomainApprovers([{ Domain: 1, Approvers: [] }, { Domain: 'a.example', Approvers: [{}] }, null])).toEqual(
      [
        { domain: '', approvers: [] },
        { domain: 'a.example', approvers: [] },
        { domain: '', approvers: [] },
      ],
    );
  });
});

describe('assignApprovers', () => {
  const names = ['www.example.com', 'example.com', 'shop.example.com'];
  const run = (domainApprovers: unknown, fallback?: string) => {
    const faults: [string, string][] = [];
    const map = assignApprovers(names, domainApprovers, { email: fallback, field: 'ApproverEmail' }, (f, m) =>
      faults.push([f, m]),
    );
    return { map: Object.fromEntries(map), faults };
  };

  it("ok/an item per name wins over the registered domain's item, which wins over the fallback", () => {
    expect(
      run(
        [
          { Domain: 'shop.example.com', Approvers: ['admin@shop.example.com'] },
          { Domain: 'example.com', Approvers: ['hostmaster@example.com'] },
        ],
        'admin@example.com',
      ),
    ).toEqual({
      map: {
        'www.example.com': 'hostmaster@example.com',
        'example.com': 'hostmaster@example.com',
        'shop.example.com': 'admin@shop.example.com',
      },
      faults: [],
    });
    expect(run(undefined, 'admin@example.com').map).toEqual({
      'www.example.com': 'admin@example.com',
      'example.com': 'admin@example.com',
      'shop.example.com': 'admin@example.com',
    });
  });

  it.each([
    [
      'neither DomainApprovers nor a fallback',
      undefined,
      undefined,
      [
        [
          'ApproverEmail',
          'EMAIL validation needs an approver for www.example.com, example.com, shop.example.com: give ApproverEmail or DomainApprovers (see GET /ApproverList).',
        ],
      ],
    ],
    [
      'a name left out',
      [{ Domain: 'shop.example.com', Approvers: ['admin@shop.example.com'] }],
      undefined,
      [['DomainApprovers', 'No approver for www.example.com, example.com.']],
    ],
    [
      'an item naming another domain',
      [{ Domain: 'example.org', Approvers: ['admin@example.org'] }],
      'admin@example.com',
      [
        [
          'DomainApprovers',
          'DomainApprovers names example.org, which is neither a name of the order nor a parent of one down to its registered domain.',
        ],
      ],
    ],
    [
      'an item without an address',
      [{ Domain: 'example.com', Approvers: [] }],
      'admin@example.com',
      [['DomainApprovers', 'Each DomainApprovers item needs a Domain and at least one approver address.']],
    ],
    [
      'a value in neither shape',
      'admin@example.com',
      undefined,
      [['DomainApprovers', 'DomainApprovers is an array of {Domain, Approvers}.']],
    ],
  ])('fail/%s', (_case, domainApprovers, fallback, faults) => {
    expect(run(domainApprovers, fallback).faults).toEqual(faults);
  });

  it('fail/an address that is not a constructed approver of its name, on the member it came from', () => {
    expect(run([{ Domain: 'shop.example.com', Approvers: ['admin@example.org'] }], 'someone@gmail.com').faults).toEqual(
      [
        ['ApproverEmail', 'someone@gmail.com is not an approver of www.example.com (see GET /ApproverList).'],
        ['ApproverEmail', 'someone@gmail.com is not an approver of example.com (see GET /ApproverList).'],
        ['DomainApprovers', 'admin@example.org is not an approver of shop.example.com (see GET /ApproverList).'],
      ],
    );
  });
});

describe('coveringDomains', () => {
  it.each([
    ['www.example.com', ['www.example.com', 'example.com']],
    ['example.com', ['example.com']],
    ['a.b.example.com', ['a.b.example.com', 'b.example.com', 'example.com']],
    ['*.shop.example.com', ['*.shop.example.com', 'shop.example.com', 'example.com']],
    ['www.shop.example.co.uk', ['www.shop.example.co.uk', 'shop.example.co.uk', 'example.co.uk']],
  ])('ok/%s is covered by %j, most specific first', (name, expected) => {
    expect(coveringDomains(name)).toEqual(expected);
  });
});

describe('assignApprovers over parents down to the registered domain', () => {
  const run = (names: string[], domainApprovers: unknown) => {
    const faults: [string, string][] = [];
    const map = assignApprovers(names, domainApprovers, { email: undefined, field: 'ApproverEmail' }, (f, m) =>
      faults.push([f, m]),
    );
    return { map: Object.fromEntries(map), faults };
  };

  it('ok/an item for a parent covers the names under it; the nearest item wins', () => {
    expect(
      run(
        ['a.b.example.com', 'c.b.example.com', 'www.example.com', '*.shop.example.com'],
        [
          { Domain: 'example.com', Approvers: ['admin@example.com'] },
          { Domain: 'b.example.com', Approvers: [{ ApproverEmail: 'hostmaster@b.example.com' }] },
        ],
      ),
    ).toEqual({
      map: {
        'a.b.example.com': 'hostmaster@b.example.com',
        'c.b.example.com': 'hostmaster@b.example.com',
        'www.example.com': 'admin@example.com',
        '*.shop.example.com': 'admin@example.com',
      },
      faults: [],
    });
  });

  it('fail/an item above the registered domain (a public suffix) covers nothing', () => {
    expect(run(['www.example.co.uk'], [{ Domain: 'co.uk', Approvers: ['admin@co.uk'] }]).faults[0]).toEqual([
      'DomainApprovers',
      'DomainApprovers names co.uk, which is neither a name of the order nor a parent of one down to its registered domain.',
    ]);
  });

  it("fail/an item for a parent whose address belongs to another parent's sibling is not an approver", () => {
    expect(run(['a.b.example.com'], [{ Domain: 'b.example.com', Approvers: ['admin@c.example.com'] }]).faults).toEqual([
      ['DomainApprovers', 'admin@c.example.com is not an approver of a.b.example.com (see GET /ApproverList).'],
    ]);
  });
});
