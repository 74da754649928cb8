// The certificate authorities behind one Issuer interface; the only code that touches signing keys.
export * from './builtin-ca.js';
export * from './checks.js';
export * from './hierarchy.js';
export * from './issuer.js';
export * from './keys.js';
export * from './key-pairs.js';
export * from './profiles.js';
export * from './issuance-claim.js';
export { OCSP_MEMORY_SECONDS, ocspMemory, type OcspMemory } from './status.js';
