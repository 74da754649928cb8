// Configuration: one schema, one loadConfig(); nothing else reads process.env.
export * from './load-config.js';
export * from './schema.js';
