import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    setupFiles: ['./test/setup.ts'],
    // The CA keys every test shares, made once per run (test/support/ca-fixture.ts).
    globalSetup: ['./test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: one worker per core keeps PostgreSQL and openssl-heavy files from starving.
    maxWorkers: 2,
  },
});
