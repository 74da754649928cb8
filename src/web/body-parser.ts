import { parse as parseQueryString } from 'node:querystring';
import secureJson from 'secure-json-parse';

/**
 * Parses a request body the way real clients of the original service send it (DESIGN §5.2):
 * JSON whatever the Content-Type says (form-labelled `{}`, `charset=utf8`), JSON strings with
 * raw line breaks (a pasted CSR), and genuine form bodies for the token endpoint.
 * Returns undefined for an empty body; throws SyntaxError for a body that is neither.
 */
export function parseBody(text: string, contentType: string | undefined): unknown {
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  const looksJson = trimmed.startsWith('{') || trimmed.startsWith('[') || trimmed.startsWith('"');
  const isForm = (contentType ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded');
  if (isForm && !looksJson) return { ...parseQueryString(trimmed) };
  return parseLenientJson(trimmed);
}

/**
 * JSON.parse, after escaping raw control characters inside string literals. `__proto__` and
 * `constructor.prototype` members are refused (prototype poisoning), as Fastify's own parser does.
 */
export function parseLenientJson(text: string): unknown {
  try {
    return parseJson(text);
  } catch (first) {
    const repaired = escapeRawControls(text);
    if (repaired === text) throw first;
    return parseJson(repaired);
  }
}

function parseJson(text: string): unknown {
  try {
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (e) {
    // secure-json-parse throws SyntaxError for bad JSON and a plain Error for poisoning.
    throw e instanceof SyntaxError ? e : new SyntaxError((e as Error).message);
  }
}

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeRawControls(text: string): string {
  let out = '';
  let inString = false;
  let escaped = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === '\\') escaped = true;
      else if (ch === '"') inString = false;
      else if (ch < ' ') {
        out += ESCAPES[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
        continue;
      }
    } else if (ch === '"') inString = true;
    out += ch;
  }
  return out;
}
