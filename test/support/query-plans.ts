// The plans of the queries a piece of code runs, for tests that pin which index a query uses.
import { CompiledQuery, createQueryId, sql, type KyselyPlugin, type RootOperationNode } from 'kysely';
import { inTransaction, type Db } from '../../src/storage/database.js';

/**
 * The SQL each query `run` makes compiles to, with its plan (SQLite: EXPLAIN QUERY PLAN;
 * PostgreSQL: EXPLAIN without sequential or bitmap scans, which a test table of a few rows would
 * otherwise make the cheapest; a bitmap scan also loses the index's order). `postgres` sets more
 * planner settings for the EXPLAINs (`enable_sort: 'off'`: an index is used for the order if one can be).
 */
export async function plans(
  db: Db,
  run: (db: Db) => Promise<unknown>,
  postgres: Record<string, 'on' | 'off'> = {},
): Promise<{ sql: string; plan: string }[]> {
  // Subqueries pass through transformQuery too; only the queries run get a result.
  const built = new Map<unknown, RootOperationNode>();
  const nodes: RootOperationNode[] = [];
  const spy: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => {
      built.set(queryId, node);
      return node;
    },
    transformResult: async ({ result, queryId }) => {
      nodes.push(built.get(queryId)!);
      return result;
    },
  };
  await run({ ...db, kysely: db.kysely.withPlugin(spy) });
  return inTransaction(db, async (tx) => {
    if (db.dialect === 'postgres')
      for (const [name, value] of Object.entries({ enable_seqscan: 'off', enable_bitmapscan: 'off', ...postgres })) {
        if (!/^enable_[a-z_]+$/.test(name)) throw new Error(`not a planner setting: ${name}`);
        await sql.raw(`SET LOCAL ${name} = ${value === 'on' ? 'on' : 'off'}`).execute(tx.kysely);
      }
    const out = [];
    for (const node of nodes) {
      const q = db.kysely.getExecutor().compileQuery(node, createQueryId());
      const explain = db.dialect === 'sqlite' ? 'EXPLAIN QUERY PLAN ' : 'EXPLAIN ';
      const r = await tx.kysely.executeQuery<Record<string, unknown>>(
        CompiledQuery.raw(explain + q.sql, [...q.parameters]),
      );
      out.push({ sql: q.sql, plan: r.rows.map((row) => String(row.detail ?? row['QUERY PLAN'])).join('\n') });
    }
    return out;
  });
}
