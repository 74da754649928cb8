import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * Scans (spec §4.22–4.23, §2.11 ConfigurationAssessment): `vulnerability_assessments` is an order's
 * weekly assessment as its customer configured it (WVS products); `scan_reports` keeps every report,
 * of the weekly assessment (`vulnerability`) and of the configuration scan after issuance
 * (`configuration`), with its grade and critical findings beside the whole report (JSON).
 */
export function scans(dialect: Dialect) {
  const id = idColumn(dialect);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('vulnerability_assessments')
        .addColumn('order_id', 'bigint', (c) => c.primaryKey())
        .addColumn('customer_id', 'bigint', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('notification_level', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('last_rescan_at', 'bigint')
        .addCheckConstraint('vulnerability_assessments_status', sql`status in ('Active', 'Inactive')`)
        .addCheckConstraint(
          'vulnerability_assessments_level',
          sql`notification_level in ('NONE', 'NEW_REPORT', 'CRITICAL')`,
        )
        .execute();
      await id(db.schema.createTable('scan_reports'))
        .addColumn('order_id', 'bigint', (c) => c.notNull())
        .addColumn('customer_id', 'bigint', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('engine', 'text', (c) => c.notNull())
        .addColumn('criteria_version', 'text', (c) => c.notNull())
        .addColumn('grade', 'text')
        .addColumn('critical', 'text', (c) => c.notNull())
        .addColumn('report', 'text', (c) => c.notNull())
        .addCheckConstraint('scan_reports_kind', sql`kind in ('vulnerability', 'configuration')`)
        .execute();
      await db.schema
        .createIndex('scan_reports_by_order')
        .on('scan_reports')
        .columns(['order_id', 'kind', 'id'])
        .execute();
    },
  };
}
