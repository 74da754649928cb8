// The only code that knows SQL: the database, migrations and one repository per aggregate.
export * from './applications-repo.js';
export * from './audit-repo.js';
export * from './customers-repo.js';
export * from './database.js';
export * from './dcv-values-repo.js';
export * from './jobs-repo.js';
export * from './kv-repo.js';
export * from './migrate.js';
export * from './tokens-repo.js';
export * from './users-repo.js';
export * from './ca-repo.js';
export * from './orders-repo.js';
export * from './mail-repo.js';
