import type { CustomerId, OrderId } from '../core/index.js';
import { customerId as toCustomerId, orderId as toOrderId } from '../core/index.js';
import { sql, type Selectable } from 'kysely';
import { fixedQuery, type Db } from './database.js';
import type { ScanReportsTable } from './schema.js';

export type AssessmentStatus = 'Active' | 'Inactive';
export type NotificationLevel = 'NONE' | 'NEW_REPORT' | 'CRITICAL';
export type ScanKind = 'vulnerability' | 'configuration';

/** An order's vulnerability assessment as its customer configured it. */
export interface Assessment {
  readonly orderId: OrderId;
  readonly customerId: CustomerId;
  readonly status: AssessmentStatus;
  readonly level: NotificationLevel;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly lastRescanAt: number | null;
}

/** A stored scan report; `report` is the RA's JSON, parsed back as it was written. */
export interface StoredScanReport {
  readonly id: number;
  readonly orderId: OrderId;
  readonly customerId: CustomerId;
  readonly kind: ScanKind;
  readonly createdAt: number;
  readonly engine: string;
  readonly criteriaVersion: string;
  readonly grade: string | null;
  /** Ids of the critical findings. */
  readonly critical: readonly string[];
  readonly report: unknown;
}

export type NewScanReport = Omit<StoredScanReport, 'id'>;

/** Vulnerability assessments and scan reports. */
const REPORT_SUMMARY = [
  'id',
  'order_id',
  'customer_id',
  'kind',
  'created_at',
  'engine',
  'criteria_version',
  'grade',
  'critical',
] as const;

/** The newest report of one kind of one order (GET /Order), by the index. */
const newestReport = fixedQuery((k, orderId: OrderId, kind: ScanKind) =>
  k
    .selectFrom('scan_reports')
    .select(REPORT_SUMMARY)
    .where('order_id', '=', orderId)
    .where('kind', '=', kind)
    .orderBy('id', 'desc')
    .limit(sql.lit(1)),
);

export class ScansRepo {
  constructor(private readonly db: Db) {}

  async assessment(orderId: OrderId): Promise<Assessment | undefined> {
    const row = await this.db.kysely
      .selectFrom('vulnerability_assessments')
      .selectAll()
      .where('order_id', '=', orderId)
      .executeTakeFirst();
    return row === undefined
      ? undefined
      : {
          orderId: toOrderId(Number(row.order_id)),
          customerId: toCustomerId(Number(row.customer_id)),
          status: row.status as AssessmentStatus,
          level: row.notification_level as NotificationLevel,
          createdAt: Number(row.created_at),
          updatedAt: Number(row.updated_at),
          lastRescanAt: row.last_rescan_at === null ? null : Number(row.last_rescan_at),
        };
  }

  /** Creates or changes an order's assessment (one statement). */
  async saveAssessment(a: {
    orderId: OrderId;
    customerId: CustomerId;
    status: AssessmentStatus;
    level: NotificationLevel;
    at: number;
  }): Promise<void> {
    await this.db.kysely
      .insertInto('vulnerability_assessments')
      .values({
        order_id: a.orderId,
        customer_id: a.customerId,
        status: a.status,
        notification_level: a.level,
        created_at: a.at,
        updated_at: a.at,
      })
      .onConflict((oc) =>
        oc.column('order_id').doUpdateSet({ status: a.status, notification_level: a.level, updated_at: a.at }),
      )
      .execute();
  }

  /**
   * Takes the order's on-demand rescan: true when none was taken in the last `gapSeconds` (a guarded
   * update, so of concurrent requests one wins).
   */
  async claimRescan(orderId: OrderId, now: number, gapSeconds: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('vulnerability_assessments')
      .set({ last_rescan_at: now })
      .where('order_id', '=', orderId)
      .where((eb) => eb.or([eb('last_rescan_at', 'is', null), eb('last_rescan_at', '<=', now - gapSeconds)]))
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  async insertReport(r: NewScanReport): Promise<number> {
    const row = await this.db.kysely
      .insertInto('scan_reports')
      .values({
        order_id: r.orderId,
        customer_id: r.customerId,
        kind: r.kind,
        created_at: r.createdAt,
        engine: r.engine,
        criteria_version: r.criteriaVersion,
        grade: r.grade,
        critical: JSON.stringify(r.critical),
        report: JSON.stringify(r.report),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  /** The order's reports of one kind, newest first. */
  async reports(orderId: OrderId, kind: ScanKind, limit: number): Promise<StoredScanReport[]> {
    const rows = await this.db.kysely
      .selectFrom('scan_reports')
      .selectAll()
      .where('order_id', '=', orderId)
      .where('kind', '=', kind)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toReport);
  }

  /** The newest report of `kind` of each order that has one, without the report body (OrderInfo lists). */
  async latest(orderIds: readonly OrderId[], kind: ScanKind): Promise<Map<OrderId, Omit<StoredScanReport, 'report'>>> {
    if (orderIds.length === 0) return new Map();
    // One order (GET /Order, every order placed): the newest by the index, without the grouping.
    const rows =
      orderIds.length === 1
        ? await newestReport(this.db, orderIds[0]!, kind)
        : await this.db.kysely
            .selectFrom('scan_reports')
            .select(REPORT_SUMMARY)
            .where('order_id', 'in', [...orderIds])
            .where('kind', '=', kind)
            .where('id', 'in', (eb) =>
              eb
                .selectFrom('scan_reports as newest')
                .select((e) => e.fn.max('newest.id').as('id'))
                .where('newest.order_id', 'in', [...orderIds])
                .where('newest.kind', '=', kind)
                .groupBy('newest.order_id'),
            )
            .execute();
    return new Map(rows.map((row) => [toOrderId(Number(row.order_id)), toReport({ ...row, report: 'null' })]));
  }
}

function toReport(row: Selectable<ScanReportsTable>): StoredScanReport {
  return {
    id: Number(row.id),
    orderId: toOrderId(Number(row.order_id)),
    customerId: toCustomerId(Number(row.customer_id)),
    kind: row.kind as ScanKind,
    createdAt: Number(row.created_at),
    engine: row.engine,
    criteriaVersion: row.criteria_version,
    grade: row.grade,
    critical: JSON.parse(row.critical) as string[],
    report: JSON.parse(row.report) as unknown,
  };
}
