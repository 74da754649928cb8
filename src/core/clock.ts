/** Time as the service sees it: injected everywhere so tests can fix it. */
export interface Clock {
  /** Current time in whole UTC seconds. */
  nowSeconds(): number;
}

export const systemClock: Clock = { nowSeconds: () => Math.floor(Date.now() / 1000) };

/** A clock that stands still until moved; for tests. */
export class FixedClock implements Clock {
  constructor(private seconds: number) {}
  nowSeconds(): number {
    return this.seconds;
  }
  set(seconds: number): void {
    this.seconds = seconds;
  }
  advance(seconds: number): void {
    this.seconds += seconds;
  }
}

/** `work`, or a rejection once `ms` have passed without it settling. */
export function withinTime<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** `YYYY-MM-DDThh:mm:ssZ` (spec §1 rule 4), or null for no time. */
export function formatTimestamp(seconds: number | null | undefined): string | null {
  if (seconds === null || seconds === undefined) return null;
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Parses an ISO 8601 timestamp into whole UTC seconds; undefined when it is not one. */
export function parseTimestamp(text: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(text.trim()))
    return undefined;
  const ms = Date.parse(text.trim());
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}
