// Checks of names, CSRs and, later, domain control: input in, result out; never writes.
export * from './base-domain.js';
export * from './csr.js';
export * from './names.js';
export * from './dns-check.js';
export * from './file-check.js';
