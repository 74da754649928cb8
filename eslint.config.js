// Lint: typescript-eslint's recommended rules plus the import table of DESIGN §2, so the
// component graph cannot drift (Boulder's security contexts: only ra decides, only storage writes SQL).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const COMPONENTS = ['core', 'config', 'storage', 'validation', 'scan', 'ca', 'ra', 'jobs', 'web', 'cli'];

/** Which components each component may import (DESIGN §2). cli and main.ts may import everything. */
const MAY_IMPORT = {
  core: [],
  config: ['core'],
  storage: ['core'],
  validation: ['core'],
  scan: ['core'],
  ca: ['core', 'storage'],
  ra: ['core', 'storage', 'validation', 'scan', 'ca'],
  jobs: ['core', 'storage', 'ra'],
  web: ['core', 'ra', 'storage'],
};

const importRules = Object.entries(MAY_IMPORT).map(([component, allowed]) => {
  const forbidden = COMPONENTS.filter((c) => c !== component && !allowed.includes(c));
  return {
    files: [`src/${component}/**/*.ts`],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...forbidden.map((c) => ({
              group: [`**/${c}/*`, `**/${c}/index.js`, `../${c}`, `../../${c}`],
              message: `src/${component}/ may not import src/${c}/ (DESIGN §2: ${component} may import ${allowed.join(', ') || 'nothing'}).`,
            })),
            {
              group: ['**/main.js', '**/run.js'],
              message: 'Only the CLI imports the composition root and the process runner.',
            },
          ],
        },
      ],
    },
  };
});

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'coverage/', 'dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-syntax': [
        'error',
        {
          selector: 'CallExpression[callee.object.name=/^(describe|it|test)$/][callee.property.name="only"]',
          message: 'No focused tests.',
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/config/**', '**/*.test.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Only src/config/ reads process.env (loadConfig).' },
      ],
    },
  },
  // The web interface's browser modules (no build step): browser globals, no Node ones.
  {
    files: ['src/web/ui/static/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: {
        document: 'readonly',
        fetch: 'readonly',
        crypto: 'readonly',
        TextEncoder: 'readonly',
        Blob: 'readonly',
        URL: 'readonly',
        btoa: 'readonly',
        window: 'readonly',
        navigator: 'readonly',
        setTimeout: 'readonly',
        URLSearchParams: 'readonly',
        location: 'readonly',
      },
    },
  },
  ...importRules,
);
