// The vocabulary of certdesk: ids, errors, clock, money, access rules, the CSR reader. Imports nothing.
export * from './access.js';
export * from './accounts.js';
export * from './baseline.js';
export * from './boolish.js';
export * from './catalog.js';
export * from './clock.js';
export * from './csr.js';
export * from './csr-verify.js';
export * from './error-table.js';
export * from './errors.js';
export * from './ids.js';
export * from './jobs.js';
export * from './money.js';
export * from './order.js';
export * from './orders.js';
export * from './holders.js';
export * from './urls.js';
