// The durable job queue runtime: lease due jobs, run their injected handlers, retry with backoff, drain on shutdown.
export * from './backoff.js';
export * from './handlers.js';
export * from './worker.js';
