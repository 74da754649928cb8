// The vocabulary of certdesk: ids, errors, clock, money, access rules. Imports nothing.
export * from './access.js';
export * from './accounts.js';
export * from './baseline.js';
export * from './catalog.js';
export * from './clock.js';
export * from './error-table.js';
export * from './errors.js';
export * from './ids.js';
export * from './jobs.js';
export * from './money.js';
export * from './orders.js';
