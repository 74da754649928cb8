// Child process of src/storage/pg-idle.test.ts: opens the PostgreSQL database named by argv[2],
// runs a transaction and a query, prints "done" and returns without closing the database. Its
// connections sit idle in the pool; the process must end anyway.
import { sql } from 'kysely';
import { inTransaction, openDatabase } from '../../src/storage/index.js';

const url = process.argv[2];
if (url === undefined) throw new Error('usage: pg-idle-child.ts <postgres-url>');
const db = await openDatabase({ url });
await inTransaction(db, async (tx) => {
  await sql`SELECT 1`.execute(tx.kysely);
});
await sql`SELECT 2`.execute(db.kysely);
process.stdout.write('done\n');
