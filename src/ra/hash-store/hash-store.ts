import { CertdeskError, type Clock, type CustomerId } from '../../core/index.js';
import type { AuditRepo } from '../../storage/audit-repo.js';
import type { KvKeyId, KvKeyInfo, KvKeyOwner, KvRepo } from '../../storage/kv-repo.js';
import { checkDnsSyntax } from '../../validation/index.js';
import { hashSecret, newSecret } from '../accounts/secrets.js';

export interface HashStoreDeps {
  readonly kv: Pick<KvRepo, 'createKey' | 'customerForKey' | 'revokeKey' | 'listKeys' | 'put' | 'get'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly clock: Clock;
}

/** Who made or revoked a key, for the audit log: the operator's CLI, or a customer's ADMIN in the web interface. */
export interface KeyActor {
  readonly actor: string;
  readonly clientAddress: string | null;
}
const OPERATOR: KeyActor = { actor: 'operator', clientAddress: null };

export interface CreatedKvKey {
  /** `cdk_` + 256 random bits. Shown once: only its SHA-256 is stored. */
  readonly key: string;
  readonly id: KvKeyId;
}

/** Longest key header looked up; real keys are 47 characters. */
const MAX_KEY_CHARS = 512;
const MAX_HASH_CHARS = 512;

/**
 * The auxiliary hash store for file validation (spec 4.35, DESIGN §5.8): customers file the
 * validation hash for a host name with their store key, and their web server module reads it
 * back. Every entry belongs to the key's customer; no key ever reads another customer's entry.
 */
export class HashStore {
  constructor(private readonly deps: HashStoreDeps) {}

  /**
   * Creates a store key for a customer (the operator's `kv-key create`). Returns the key, to be
   * shown once, and its id. Throws invalidInput for a label over 100 characters and notFound
   * for an unknown customer; creates nothing then.
   */
  async createKey(customerId: CustomerId, label = 'kv', by: KeyActor = OPERATOR): Promise<CreatedKvKey> {
    if (label.length > 100)
      throw new CertdeskError('invalidInput', 'The label is longer than 100 characters.', { field: 'label' });
    const key = newSecret('cdk_');
    const now = this.deps.clock.nowSeconds();
    const id = await this.deps.kv.createKey(customerId, hashSecret(key), label, now);
    if (id === undefined) throw new CertdeskError('notFound', `No such customer: ${customerId}`);
    await this.deps.audit.append({
      at: now,
      customerId,
      actor: by.actor,
      clientAddress: by.clientAddress,
      action: 'kv.key.created',
      subject: `kvkey:${id}`,
      details: { label },
    });
    return { key, id };
  }

  /** A customer's keys (never the keys themselves: only their hashes are stored), newest first. */
  listKeys(customerId: CustomerId): Promise<KvKeyInfo[]> {
    return this.deps.kv.listKeys(customerId);
  }

  /**
   * Revokes a customer's key; modules using it get 401 at once. Throws notFound when the
   * customer has no such live key.
   */
  async revokeKey(customerId: CustomerId, id: KvKeyId, by: KeyActor = OPERATOR): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    if (!(await this.deps.kv.revokeKey(customerId, id, now)))
      throw new CertdeskError('notFound', `No live hash store key ${id} for customer ${customerId}`);
    await this.deps.audit.append({
      at: now,
      customerId,
      actor: by.actor,
      clientAddress: by.clientAddress,
      action: 'kv.key.revoked',
      subject: `kvkey:${id}`,
    });
  }

  /**
   * Files `hash` for host `name` under the key's customer, replacing an earlier one, and audits
   * it. Throws unauthenticated for a missing, unknown or revoked key (checked first), and
   * invalidInput (field `name` or `hash`) for a bad name or hash; writes nothing then.
   */
  async file(key: string | undefined, name: string, hash: unknown, clientAddress: string | null): Promise<void> {
    // `hash` is the body member as received: its type is checked here with its content.
    const owner = await this.authenticate(key);
    const host = normalizeHostName(name);
    const value = checkHash(hash);
    const now = this.deps.clock.nowSeconds();
    await this.deps.kv.put(owner.customerId, host, value, now);
    await this.deps.audit.append({
      at: now,
      customerId: owner.customerId,
      actor: `kvkey:${owner.keyId}`,
      clientAddress,
      action: 'kv.hash.filed',
      subject: `name:${host}`,
    });
  }

  /**
   * The hash the key's customer filed for host `name`, or undefined when there is none (another
   * customer's entry counts as none). Throws unauthenticated for a missing, unknown or revoked
   * key and invalidInput (field `name`) for a bad name.
   */
  async lookup(key: string | undefined, name: string): Promise<string | undefined> {
    const owner = await this.authenticate(key);
    const entry = await this.deps.kv.get(owner.customerId, normalizeHostName(name));
    return entry?.hash;
  }

  private async authenticate(key: string | undefined): Promise<KvKeyOwner> {
    const trimmed = key?.trim() ?? '';
    const owner =
      trimmed === '' || trimmed.length > MAX_KEY_CHARS
        ? undefined
        : await this.deps.kv.customerForKey(hashSecret(trimmed));
    if (owner === undefined)
      throw new CertdeskError('unauthenticated', 'The hash store key (x-api-key) is missing, unknown or revoked.');
    return owner;
  }
}

/**
 * Normalizes a host name for the store: one trailing dot dropped, lower-cased, IDN → punycode.
 * Accepts LDH labels of 1–63 characters (RFC 1035/5890), at least two labels, at most 253
 * characters, a TLD that is not all digits (so no IPv4 literal); no wildcard, port or path.
 * Throws CertdeskError invalidInput (field `name`) otherwise.
 */
export function normalizeHostName(input: string): string {
  const checked = checkDnsSyntax(input.slice(0, 1024), { allowWildcard: false });
  if (!checked.ok) throw new CertdeskError('invalidInput', checked.problem, { field: 'name' });
  return checked.name;
}

/** A hash value as filed: 1–512 printable ASCII characters (no line breaks). Throws invalidInput (field `hash`). */
export function checkHash(hash: unknown): string {
  if (typeof hash !== 'string')
    throw new CertdeskError('invalidInput', 'The body must carry the hash as a string member "hash".', {
      field: 'hash',
    });
  if (hash.length === 0 || hash.length > MAX_HASH_CHARS)
    throw new CertdeskError('invalidInput', `The hash must have 1-${MAX_HASH_CHARS} characters.`, { field: 'hash' });
  if (!/^[\x20-\x7e]+$/.test(hash))
    throw new CertdeskError('invalidInput', 'The hash must be printable ASCII on one line.', { field: 'hash' });
  return hash;
}
