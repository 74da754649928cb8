import type { CreateTableBuilder } from 'kysely';
import type { Dialect } from '../database.js';

export type Table = CreateTableBuilder<string, never>;

/**
 * Adds the integer primary key `id` the way each dialect generates it. Shared by migrations;
 * it must keep producing the same SQL, since shipped migrations are never changed.
 */
export function idColumn(dialect: Dialect): (t: Table) => Table {
  return (t) =>
    dialect === 'postgres'
      ? t.addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
      : t.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
}
