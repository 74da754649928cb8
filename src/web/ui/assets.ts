import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { App } from '../types.js';

// The web interface's static files (src/web/ui/static): one stylesheet and a few JavaScript
// modules, read once at start, served with their types. No build step: they are written as
// browsers run them.

const DIR = join(import.meta.dirname, 'static');
const TYPES: Record<string, string> = {
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
};

export function registerAssets(app: App): void {
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const name of readdirSync(DIR)) {
    const type = TYPES[name.split('.').pop() ?? ''];
    if (type !== undefined) files.set(name, { body: readFileSync(join(DIR, name)), type });
  }
  app.get<{ Params: { name: string } }>('/ui/:name', async (request, reply) => {
    const file = files.get(request.params.name);
    if (file === undefined) return reply.code(404).type('text/plain').send('not found\n');
    return reply
      .type(file.type)
      .header('cache-control', 'public, max-age=300')
      .header('x-content-type-options', 'nosniff')
      .send(file.body);
  });
}
