// TLS configuration and vulnerability assessment: network in, result out, never writes (DESIGN §2).
export * from './types.js';
export { scanHost } from './scanner.js';
