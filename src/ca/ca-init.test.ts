import { describe, expect, it } from 'vitest';
import { makeKeys, missingKeys, planHierarchy, type ExistingCert } from './ca-init.js';
import type { BrandHierarchy, CaRole } from './hierarchy.js';
import type { CaKey, CaKeyAlgorithm } from './keys.js';

const full: BrandHierarchy = {
  id: 'Full',
  name: 'Full',
  issuer: 'full',
  signatureHashAlgorithms: ['SHA256-FULL-CHAIN', 'SHA2-256'],
  codeSigning: true,
  smime: true,
};
const plain: BrandHierarchy = {
  id: 'Plain',
  name: 'Plain',
  issuer: 'plain',
  signatureHashAlgorithms: ['SHA256-FULL-CHAIN'],
  codeSigning: false,
  smime: false,
};

/** Stored certificates as the CA would hold them: `role@generation` (with `!` = distrusted), keys named as init names them. */
function stored(issuer: string, specs: string[], keyOf: Partial<Record<CaRole, string>> = {}): ExistingCert[] {
  return specs.map((s) => {
    const [, role, gen, mark] = /^([a-z-]+)@(\d+)(!?)$/.exec(s)!;
    return {
      row: {
        id: `${issuer}-${role}-${gen}`,
        role: role!,
        generation: Number(gen),
        distrust_phase1: mark === '!' ? 1 : null,
      },
      key: { id: keyOf[role as CaRole] ?? `${issuer}-${role}-${gen}` },
    };
  });
}

/** The CA's choice of a role's certificate: the newest trusted one, else the newest. */
const newest = (certs: ExistingCert[]) => (issuer: string, role: CaRole) =>
  certs
    .filter((c) => c.row.id.startsWith(`${issuer}-`) && c.row.role === role)
    .sort(
      (a, b) =>
        Number(a.row.distrust_phase1 === null) - Number(b.row.distrust_phase1 === null) ||
        a.row.generation - b.row.generation,
    )
    .at(-1);

const ids = (plan: ReturnType<typeof planHierarchy>) => plan.map((p) => `${p.id} key=${p.keyId}`);

describe('planHierarchy', () => {
  it("ok/a fresh CA: every role of every brand, parents first; the cross-signed and legacy intermediates certify their twin's new key", () => {
    expect(ids(planHierarchy([full, plain], [], newest([])))).toEqual([
      'full-rsa-root-1 key=full-rsa-root-1',
      'full-ecc-root-1 key=full-ecc-root-1',
      'full-rsa-int-1 key=full-rsa-int-1',
      'full-ecc-int-1 key=full-ecc-int-1',
      'full-ecc-int-x-1 key=full-ecc-int-1',
      'full-legacy-root-1 key=full-legacy-root-1',
      'full-rsa-int-legacy-1 key=full-rsa-int-1',
      'full-codesign-int-1 key=full-codesign-int-1',
      'full-smime-int-1 key=full-smime-int-1',
      'plain-rsa-root-1 key=plain-rsa-root-1',
      'plain-ecc-root-1 key=plain-ecc-root-1',
      'plain-rsa-int-1 key=plain-rsa-int-1',
      'plain-ecc-int-1 key=plain-ecc-int-1',
      'plain-ecc-int-x-1 key=plain-ecc-int-1',
    ]);
  });

  it('ok/a complete hierarchy plans nothing; a half-made one only what is missing', () => {
    const complete = stored('plain', ['rsa-root@1', 'ecc-root@1', 'rsa-int@1', 'ecc-int@1', 'ecc-int-x@1'], {
      'ecc-int-x': 'plain-ecc-int-1',
    });
    expect(planHierarchy([plain], complete, newest(complete))).toEqual([]);
    const half = stored('plain', ['rsa-root@1', 'ecc-root@1', 'rsa-int@1', 'ecc-int@1']);
    expect(ids(planHierarchy([plain], half, newest(half)))).toEqual(['plain-ecc-int-x-1 key=plain-ecc-int-1']);
  });

  it("ok/a distrusted role gets the next generation with a new key; its twin follows the twin's current key", () => {
    const certs = stored(
      'full',
      [
        'rsa-root@1',
        'ecc-root@1',
        'rsa-int@1!',
        'ecc-int@1',
        'ecc-int-x@1!',
        'legacy-root@1',
        'rsa-int-legacy@1',
        'codesign-int@1',
        'smime-int@1',
      ],
      { 'ecc-int-x': 'full-ecc-int-1', 'rsa-int-legacy': 'full-rsa-int-1' },
    );
    expect(ids(planHierarchy([full], certs, newest(certs)))).toEqual([
      'full-rsa-int-2 key=full-rsa-int-2',
      'full-ecc-int-x-2 key=full-ecc-int-1',
    ]);
  });
});

describe('missingKeys', () => {
  it("ok/each key once, with its spec's algorithm; stored keys are not made again", () => {
    const plan = planHierarchy([full], [], newest([]));
    const wanted = missingKeys(plan, (id) => id === 'full-rsa-root-1');
    expect(wanted.map((w) => w.id)).toEqual([
      'full-ecc-root-1',
      'full-rsa-int-1',
      'full-ecc-int-1',
      'full-legacy-root-1',
      'full-codesign-int-1',
      'full-smime-int-1',
    ]);
    expect(wanted.find((w) => w.id === 'full-ecc-root-1')?.algorithm).toEqual({ type: 'ecdsa', curve: 'P-384' });
    expect(missingKeys(planHierarchy([full], [], newest([]), { rsaRootBits: 3072 }), () => false)[0]).toEqual({
      id: 'full-rsa-root-1',
      algorithm: { type: 'rsa', bits: 3072 },
    });
  });
});

describe('makeKeys', () => {
  const rsa = (bits: number): CaKeyAlgorithm => ({ type: 'rsa', bits });
  const ec: CaKeyAlgorithm = { type: 'ecdsa', curve: 'P-256' };
  /** A make() whose keys finish when the test says so; records the order of starts and the most under way at once. */
  function controlled() {
    const started: string[] = [];
    const pending = new Map<string, { resolve: () => void; reject: (e: Error) => void }>();
    let running = 0;
    let most = 0;
    const make = (id: string) =>
      new Promise<CaKey>((resolve, reject) => {
        started.push(id);
        most = Math.max(most, ++running);
        pending.set(id, {
          resolve: () => {
            running--;
            resolve({ id } as CaKey);
          },
          reject: (e) => {
            running--;
            reject(e);
          },
        });
      });
    const tick = () => new Promise((r) => setImmediate(r));
    return { make, started, pending, most: () => most, tick };
  }

  it('ok/at most `parallel` at once, the costliest first, the rest as places free up', async () => {
    const c = controlled();
    const wanted = [
      { id: 'ec', algorithm: ec },
      { id: 'int-a', algorithm: rsa(2048) },
      { id: 'root-a', algorithm: rsa(4096) },
      { id: 'int-b', algorithm: rsa(2048) },
      { id: 'root-b', algorithm: rsa(4096) },
    ];
    const done = makeKeys(wanted, c.make, 2);
    await c.tick();
    expect(c.started).toEqual(['root-a', 'root-b']);
    c.pending.get('root-b')!.resolve();
    await c.tick();
    expect(c.started).toEqual(['root-a', 'root-b', 'int-a']);
    for (const id of ['int-a', 'root-a']) {
      c.pending.get(id)!.resolve();
      await c.tick();
    }
    for (const id of ['int-b', 'ec']) {
      c.pending.get(id)!.resolve();
      await c.tick();
    }
    expect((await done).map((k) => k.id).sort()).toEqual(['ec', 'int-a', 'int-b', 'root-a', 'root-b']);
    expect(c.most()).toBe(2);
  });

  it('fail/after a failure no further key is started, and the one under way is awaited before the error', async () => {
    const c = controlled();
    const wanted = [
      { id: 'root-a', algorithm: rsa(4096) },
      { id: 'root-b', algorithm: rsa(4096) },
      { id: 'int', algorithm: rsa(2048) },
    ];
    let settled = false;
    const done = makeKeys(wanted, c.make, 2).finally(() => (settled = true));
    await c.tick();
    c.pending.get('root-a')!.reject(new Error('database gone'));
    await c.tick();
    expect(settled).toBe(false);
    c.pending.get('root-b')!.resolve();
    await expect(done).rejects.toThrow('database gone');
    expect(c.started).toEqual(['root-a', 'root-b']);
  });
});
