import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/** The first schema: accounts and tokens, and the order, certificate, job and audit tables. */
export function initial(dialect: Dialect) {
  const id = idColumn(dialect);
  const ref = (table: string) => (c: ColumnDefinitionBuilder) => c.notNull().references(`${table}.id`);

  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await id(db.schema.createTable('customers'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('currency', 'text', (c) => c.notNull())
        .addColumn('credit_limit_minor', 'bigint', (c) => c.notNull())
        .addColumn('used_minor', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('country', 'text', (c) => c.notNull())
        .addColumn('locale', 'text', (c) => c.notNull())
        .addColumn('timezone', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        // Credit is reserved with a guarded UPDATE (used + price <= limit); a refund can never
        // take the used amount below zero. The limit itself may be lowered below `used`.
        .addCheckConstraint('customers_used_not_negative', sql`used_minor >= 0`)
        .execute();

      await id(db.schema.createTable('users'))
        .addColumn('customer_id', 'bigint', ref('customers'))
        .addColumn('username', 'text', (c) => c.notNull().unique())
        .addColumn('full_name', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('mobile', 'text')
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('roles', 'text', (c) => c.notNull())
        .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('timezone', 'text')
        .addColumn('locale', 'text')
        .addColumn('special_product_availability', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('two_factor_enabled', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('password_changed_at', 'bigint', (c) => c.notNull())
        .addColumn('deleted_at', 'bigint')
        .execute();
      await db.schema.createIndex('users_customer').on('users').columns(['customer_id', 'id']).execute();

      await id(db.schema.createTable('api_applications'))
        .addColumn('customer_id', 'bigint', ref('customers'))
        .addColumn('user_id', 'bigint', ref('users'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull().unique())
        .addColumn('secret_hash', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .execute();

      await id(db.schema.createTable('oauth_tokens'))
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('family', 'text', (c) => c.notNull())
        .addColumn('application_id', 'bigint', (c) => c.references('api_applications.id'))
        .addColumn('user_id', 'bigint', ref('users'))
        .addColumn('customer_id', 'bigint', ref('customers'))
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('auth_type', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .execute();
      await db.schema.createIndex('oauth_tokens_family').on('oauth_tokens').column('family').execute();
      await db.schema.createIndex('oauth_tokens_expiry').on('oauth_tokens').column('expires_at').execute();

      await id(db.schema.createTable('orders'))
        .addColumn('customer_id', 'bigint', ref('customers'))
        .addColumn('partner_order_id', 'text', (c) => c.notNull())
        .addColumn('request_hash', 'text', (c) => c.notNull())
        .addColumn('product_code', 'text', (c) => c.notNull())
        .addColumn('product_type', 'text', (c) => c.notNull())
        .addColumn('ca_brand', 'text', (c) => c.notNull())
        .addColumn('validation_level', 'text')
        .addColumn('common_name', 'text', (c) => c.notNull())
        .addColumn('major_status', 'text', (c) => c.notNull())
        .addColumn('minor_status', 'text', (c) => c.notNull())
        .addColumn('dv_auth_method', 'text')
        .addColumn('signature_hash_algorithm', 'text', (c) => c.notNull())
        .addColumn('validity_period', 'integer', (c) => c.notNull())
        .addColumn('server_count', 'integer', (c) => c.notNull())
        .addColumn('san_names', 'text', (c) => c.notNull())
        .addColumn('params_json', 'text', (c) => c.notNull())
        .addColumn('contacts_json', 'text', (c) => c.notNull())
        .addColumn('organization_json', 'text')
        .addColumn('csr_pem', 'text')
        .addColumn('csr_sha256', 'text')
        .addColumn('price_minor', 'bigint', (c) => c.notNull())
        .addColumn('currency', 'text', (c) => c.notNull())
        .addColumn('billing_status', 'text', (c) => c.notNull())
        .addColumn('order_date', 'bigint', (c) => c.notNull())
        .addColumn('update_date', 'bigint', (c) => c.notNull())
        .addColumn('issued_at', 'bigint')
        .addColumn('term_end', 'bigint')
        .addColumn('failure_reason', 'text')
        .addUniqueConstraint('orders_partner_order_id', ['customer_id', 'partner_order_id'])
        .execute();
      // Every read is scoped to one customer: paging by id, polling by UpdateDate, filters.
      await db.schema
        .createIndex('orders_customer_updated')
        .on('orders')
        .columns(['customer_id', 'update_date', 'id'])
        .execute();
      await db.schema
        .createIndex('orders_customer_status')
        .on('orders')
        .columns(['customer_id', 'major_status', 'id'])
        .execute();
      await db.schema
        .createIndex('orders_customer_name')
        .on('orders')
        .columns(['customer_id', 'common_name'])
        .execute();

      await id(db.schema.createTable('order_names'))
        .addColumn('order_id', 'bigint', ref('orders'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('method', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('approver_email', 'text')
        .addColumn('validated_at', 'bigint')
        .addColumn('last_checked_at', 'bigint')
        .addColumn('last_problem', 'text')
        .addUniqueConstraint('order_names_unique', ['order_id', 'name'])
        .execute();

      await db.schema
        .createTable('dcv_values')
        .addColumn('customer_id', 'bigint', ref('customers'))
        .addColumn('ca_brand', 'text', (c) => c.notNull())
        .addColumn('csr_sha256', 'text', (c) => c.notNull())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('dcv_values_pk', ['customer_id', 'ca_brand', 'csr_sha256'])
        .execute();

      await id(db.schema.createTable('certificates'))
        .addColumn('order_id', 'bigint', (c) => c.references('orders.id'))
        .addColumn('customer_id', 'bigint', (c) => c.references('customers.id'))
        .addColumn('issuer_id', 'text', (c) => c.notNull())
        .addColumn('serial', 'text', (c) => c.notNull().unique())
        .addColumn('pem', 'text', (c) => c.notNull())
        .addColumn('chain_pem', 'text', (c) => c.notNull())
        .addColumn('pkcs7_pem', 'text', (c) => c.notNull())
        .addColumn('not_before', 'bigint', (c) => c.notNull())
        .addColumn('not_after', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .addColumn('revocation_reason', 'integer')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('certificates_order').on('certificates').column('order_id').execute();
      await db.schema
        .createIndex('certificates_issuer_revoked')
        .on('certificates')
        .columns(['issuer_id', 'revoked_at'])
        .execute();

      await id(db.schema.createTable('ledger'))
        .addColumn('customer_id', 'bigint', ref('customers'))
        .addColumn('order_id', 'bigint', (c) => c.references('orders.id'))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('amount_minor', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        // One charge and at most one refund per order: a retried step cannot bill twice.
        .addUniqueConstraint('ledger_once_per_order', ['order_id', 'kind'])
        .execute();

      await id(db.schema.createTable('jobs'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('unique_key', 'text', (c) => c.unique())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('jobs_due').on('jobs').columns(['status', 'run_at']).execute();

      await id(db.schema.createTable('audit_events'))
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('customer_id', 'bigint')
        .addColumn('actor', 'text', (c) => c.notNull())
        .addColumn('client_address', 'text')
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('subject', 'text')
        .addColumn('details', 'text')
        .execute();
      await db.schema.createIndex('audit_events_customer').on('audit_events').columns(['customer_id', 'at']).execute();
    },
  };
}
