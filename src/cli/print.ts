import { formatTimestamp } from '../core/index.js';
/** Prints a command's result: one JSON object with --json, else readable text. */
export function print(json: boolean, object: Record<string, unknown>, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(object, null, 2)}\n` : `${text}\n`);
}

/** `key: value` lines of an object, for the text form of `print`. */
export function lines(object: Record<string, unknown>): string {
  return Object.entries(object)
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join('\n');
}

/** A Unix time in the API's timestamp form. */
export function iso(seconds: number): string {
  return formatTimestamp(seconds) ?? '';
}
