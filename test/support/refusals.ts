// Real database failures for the tests of what commits together: triggers that refuse the outbox
// rows of one kind (what commits with a mail), or every write of a CRL, on SQLite and PostgreSQL.
import { sql } from 'kysely';
import type { Db } from '../../src/storage/index.js';

/** Makes the database refuse every outbox row of `kind` (of one order, with `orderId`) until `allowMail`. */
export async function refuseMail(db: Db, kind: string, orderId?: number): Promise<void> {
  const when = `NEW.kind = '${kind}'${orderId === undefined ? '' : ` AND NEW.order_id = ${Math.trunc(orderId)}`}`;
  if (db.dialect === 'sqlite') {
    await sql
      .raw(
        `CREATE TRIGGER refuse_mail BEFORE INSERT ON mail_outbox WHEN ${when} BEGIN SELECT RAISE(ABORT, 'outbox refused'); END`,
      )
      .execute(db.kysely);
    return;
  }
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION refuse_mail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'outbox refused'; END $$ LANGUAGE plpgsql`,
    )
    .execute(db.kysely);
  await sql
    .raw(
      `CREATE TRIGGER refuse_mail BEFORE INSERT ON mail_outbox FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION refuse_mail()`,
    )
    .execute(db.kysely);
}

export async function allowMail(db: Db): Promise<void> {
  await sql
    .raw(
      db.dialect === 'sqlite'
        ? 'DROP TRIGGER IF EXISTS refuse_mail'
        : 'DROP TRIGGER IF EXISTS refuse_mail ON mail_outbox',
    )
    .execute(db.kysely);
}

/** Makes the database refuse every write of a CRL (`ca_crls`) until `allowCrlWrites`. */
export async function refuseCrlWrites(db: Db): Promise<void> {
  const statements =
    db.dialect === 'sqlite'
      ? [
          "CREATE TRIGGER refuse_crl_insert BEFORE INSERT ON ca_crls BEGIN SELECT RAISE(ABORT, 'crl refused'); END",
          "CREATE TRIGGER refuse_crl_update BEFORE UPDATE ON ca_crls BEGIN SELECT RAISE(ABORT, 'crl refused'); END",
        ]
      : [
          "CREATE OR REPLACE FUNCTION refuse_crl() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'crl refused'; END $$ LANGUAGE plpgsql",
          'CREATE TRIGGER refuse_crl BEFORE INSERT OR UPDATE ON ca_crls FOR EACH ROW EXECUTE FUNCTION refuse_crl()',
        ];
  for (const q of statements) await sql.raw(q).execute(db.kysely);
}

export async function allowCrlWrites(db: Db): Promise<void> {
  const statements =
    db.dialect === 'sqlite'
      ? ['DROP TRIGGER IF EXISTS refuse_crl_insert', 'DROP TRIGGER IF EXISTS refuse_crl_update']
      : ['DROP TRIGGER IF EXISTS refuse_crl ON ca_crls'];
  for (const q of statements) await sql.raw(q).execute(db.kysely);
}
