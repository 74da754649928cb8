// Generates docs/errors.md (from the error table), docs/access.md (from the routes' access
// rules and the scope/role tables) and docs/configuration.md (from the configuration schema). `npm run docs:errors` writes them; a test checks they are current.
import { writeFileSync } from 'node:fs';
import { accessDoc, configurationDoc, errorsDoc } from './docs-content.js';

writeFileSync(new URL('../docs/errors.md', import.meta.url), errorsDoc());
writeFileSync(new URL('../docs/access.md', import.meta.url), await accessDoc());
writeFileSync(new URL('../docs/configuration.md', import.meta.url), configurationDoc());
console.log('wrote docs/errors.md, docs/access.md and docs/configuration.md');
