// Operator commands for the hash store's keys (spec 4.35: "a separate credential obtained from
// the partner manager or support").
import type { Command } from 'commander';
import { parseCustomer, parsePositive } from './args.js';
import { lines, print } from './print.js';
import type { HashStore } from '../ra/hash-store/hash-store.js';
import { kvKeyId } from '../storage/kv-repo.js';

/** What the kv commands need: the hash store, and a way to release what was opened for it. */
export type OpenHashStore = () => Promise<{
  hashStore: Pick<HashStore, 'createKey' | 'revokeKey'>;
  close(): Promise<void>;
}>;

/**
 * Adds `kv-key create --customer ID [--label L] [--json]` (prints `CustomerID`, `KvKeyID` and
 * `KvKey`, the key shown this once) and `kv-key revoke --customer ID --id N [--json]` to
 * `program`. `open` is called once per command run and its result closed afterwards. Errors
 * (bad id, unknown customer or key) are thrown for the CLI's runner to print.
 */
export function addKvCommands(program: Command, open: OpenHashStore): void {
  const kvKey = program.command('kv-key').description('manage hash store keys (x-api-key of the web server module)');

  kvKey
    .command('create')
    .description('create a hash store key for a customer; the key is shown only once')
    .requiredOption('--customer <id>', 'customer id')
    .option('--label <label>', 'a note on where the key is used', 'kv')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; label: string; json?: boolean }) => {
      const customer = parseCustomer(o.customer);
      const created = await withHashStore(open, (s) => s.createKey(customer, o.label));
      const out = { CustomerID: customer, KvKeyID: created.id, KvKey: created.key };
      print(
        o.json === true,
        out,
        `${lines(out)}\n\nThe key is shown only now; configure it as the module's x-api-key.`,
      );
    });

  kvKey
    .command('revoke')
    .description('revoke a hash store key; modules using it get 401 at once')
    .requiredOption('--customer <id>', 'customer id')
    .requiredOption('--id <id>', 'key id (KvKeyID of kv-key create)')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; id: string; json?: boolean }) => {
      const customer = parseCustomer(o.customer);
      const id = parsePositive(o.id, 'key id');
      await withHashStore(open, (s) => s.revokeKey(customer, kvKeyId(id)));
      const out = { CustomerID: customer, KvKeyID: id, Revoked: true };
      print(o.json === true, out, lines(out));
    });
}

async function withHashStore<T>(
  open: OpenHashStore,
  fn: (s: Pick<HashStore, 'createKey' | 'revokeKey'>) => Promise<T>,
): Promise<T> {
  const opened = await open();
  try {
    return await fn(opened.hashStore);
  } finally {
    await opened.close();
  }
}
