// Writes held for later in a PostgreSQL transaction (storage `writeLater`): how they are marked
// for the connection, and how the connection folds them into as few statements as they can go in
// without meeting (`sendingLater` in pg-connection.ts sends them).
import { CompiledQuery } from 'kysely';
import { memoised } from './memo.js';

/** How `writeLater` marks its statements for the connection: the table, then the statement. */
export const LATER = '/* later ';

/** `query` marked for `sendingLater` to hold (storage `writeLater`, PostgreSQL). */
export function markedLater(table: string, query: CompiledQuery): CompiledQuery {
  return CompiledQuery.raw(`${LATER}${table} */ ${query.sql}`, [...query.parameters]);
}
export interface LaterWrite {
  readonly table: string;
  readonly text: string;
  readonly values: unknown[];
}

/**
 * Writes held for later as one statement: each but the last a data-modifying WITH, the
 * parameters numbered on. PostgreSQL runs the parts in an order of its own, on one snapshot: no
 * part sees another's rows, which is why the parts must not meet (`foldable`, `carriesHeld`, and
 * at most one write per table in a statement: `heldStatements`).
 */
export function laterWritesStatement(writes: readonly LaterWrite[]): { text: string; values: unknown[] } {
  if (writes.length === 1) return { text: writes[0]!.text, values: writes[0]!.values };
  const values: unknown[] = [];
  const texts = writes.map((w) => {
    const offset = values.length;
    values.push(...w.values);
    return renumbered(w.text, offset);
  });
  const last = texts.pop()!;
  return { text: `with ${texts.map((t, i) => `"later_${i + 1}" as (${t})`).join(', ')} ${last}`, values };
}

/**
 * What the held writes' statements work out from a text alone, for the few texts they have:
 * the text cut at its parameters (`$n`), and whether it folds. Without them, rewriting the
 * parameters of every held write with a regular expression was two fifths of the connection's
 * own time on the inline order path (BENCH_PROFILE=1).
 */
const MEMO_ENTRIES = 2_000;
/** text → its pieces: the text between parameters at even indices, each parameter's number at odd. */
const parameterPieces = new Map<string, readonly string[]>();
const foldableTexts = new Map<string, boolean>();

/** `text` with its parameters `$n` numbered on from `offset`. */
function renumbered(text: string, offset: number): string {
  if (offset === 0) return text;
  const pieces = memoised(parameterPieces, text, () => text.split(/\$(\d+)/), MEMO_ENTRIES);
  let out = pieces[0]!;
  for (let i = 1; i < pieces.length; i += 2) out += `$${Number(pieces[i]) + offset}${pieces[i + 1]!}`;
  return out;
}

/**
 * A write `laterWritesStatement` can fold in: an INSERT or UPDATE of its own table reading no
 * other (no SELECT, no FROM), with no literals whose text could hold a `$`.
 */
function foldable(text: string): boolean {
  return memoised(
    foldableTexts,
    text,
    () => /^(insert|update)\b/i.test(text) && !/\b(select|from)\b/i.test(text) && !/['$]\$|'/.test(text),
    MEMO_ENTRIES,
  );
}

/**
 * The held writes as the statements that carry them, in the order they were written: a run of
 * foldable writes, each of a table the run does not write yet, as one statement; any other write
 * (one that reads a table, or a data-modifying WITH of its own) as a statement of its own. Each
 * statement runs after the ones before it, so a write sees every write held before it, as it
 * would have sent alone.
 */
export function heldStatements(writes: readonly LaterWrite[]): { text: string; values: unknown[] }[] {
  const statements: { text: string; values: unknown[] }[] = [];
  let run: LaterWrite[] = [];
  const endRun = () => {
    if (run.length > 0) statements.push(laterWritesStatement(run));
    run = [];
  };
  for (const w of writes) {
    if (!foldable(w.text)) {
      endRun();
      statements.push({ text: w.text, values: w.values });
      continue;
    }
    // Two writes of one table in one statement could meet on a row: the second starts the next one.
    if (run.some((r) => r.table === w.table)) endRun();
    run.push(w);
  }
  endRun();
  return statements;
}

/**
 * Whether the last held writes can go in `text`'s own statement: an INSERT of values (its
 * RETURNING answered as before) into a table none of them writes, reading no table, so that none
 * of them can miss another's rows. Only the foldable writes held after the last one that is not
 * go in it; the ones before run first, as statements of their own.
 */
export function carriesHeld(text: string, held: readonly LaterWrite[]): boolean {
  const table = /^insert into "([^"]+)"/i.exec(text)?.[1];
  if (table === undefined || !foldable(text)) return false;
  const tail = held.slice(lastUnfoldable(held) + 1);
  return (
    tail.length > 0 && !tail.some((w) => w.table === table) && new Set(tail.map((w) => w.table)).size === tail.length
  );
}

/** Index of the last held write that is not foldable, or -1. */
export function lastUnfoldable(held: readonly LaterWrite[]): number {
  for (let i = held.length - 1; i >= 0; i--) if (!foldable(held[i]!.text)) return i;
  return -1;
}
