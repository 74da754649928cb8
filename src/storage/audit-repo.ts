import type { CustomerId } from '../core/index.js';
import { rowsInsert, writeLater, type Db } from './database.js';

export interface AuditEvent {
  readonly at: number;
  readonly customerId: CustomerId | null;
  /** `user:<id>`, `app:<client_id>`, `operator`, `system`, … */
  readonly actor: string;
  readonly clientAddress: string | null;
  readonly action: string;
  readonly subject: string | null;
  readonly details?: Record<string, unknown>;
}

const AUDIT_COLUMNS = ['at', 'customer_id', 'actor', 'client_address', 'action', 'subject', 'details'] as const;

/** Append-only audit log. */
export class AuditRepo {
  constructor(private readonly db: Db) {}

  async append(event: AuditEvent): Promise<void> {
    await this.appendMany([event]);
  }

  /**
   * Several events in one statement (the CA writes its signing events in batches). In a
   * transaction on PostgreSQL the statement goes with the transaction's next one (`writeLater`).
   */
  async appendMany(events: readonly AuditEvent[]): Promise<void> {
    if (events.length === 0) return;
    const rows = events.map((event) => ({
      at: event.at,
      customer_id: event.customerId,
      actor: event.actor,
      client_address: event.clientAddress,
      action: event.action,
      subject: event.subject,
      details: event.details === undefined ? null : JSON.stringify(event.details),
    }));
    await writeLater(this.db, 'audit_events', rowsInsert(this.db, 'audit_events', AUDIT_COLUMNS, rows));
  }

  async listByCustomer(customer: CustomerId, limit = 100): Promise<(AuditEvent & { id: number })[]> {
    const rows = await this.db.kysely
      .selectFrom('audit_events')
      .select(['id', 'at', 'actor', 'client_address', 'action', 'subject', 'details'])
      .where('customer_id', '=', customer)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      id: r.id,
      at: r.at,
      customerId: customer,
      actor: r.actor,
      clientAddress: r.client_address,
      action: r.action,
      subject: r.subject,
      details: r.details === null ? undefined : (JSON.parse(r.details) as Record<string, unknown>),
    }));
  }
}
