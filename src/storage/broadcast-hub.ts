// What every broadcast transport shares (broadcast.ts, redis-broadcast.ts): the subscribers and
// one's own announcements coming back, and the heartbeat's interval.
import { randomBytes } from 'node:crypto';

/** What every transport shares: the subscribers, and waiting for one's own announcement to come back. */
export class Hub {
  private readonly subscribers = new Map<string, (() => void)[]>();
  private readonly waiting = new Map<string, () => void>();
  private seq = 0;
  readonly sender = randomBytes(6).toString('hex');

  constructor(private readonly echoTimeoutMs: number) {}

  subscribe(topic: string, fn: () => void): void {
    this.subscribers.set(topic, [...(this.subscribers.get(topic) ?? []), fn]);
  }

  /** Sends `topic` with `send` and waits for its echo; a failed send is reported to `onError`, not thrown. */
  async announce(topic: string, send: (text: string) => Promise<unknown>, onError?: (err: Error) => void) {
    const { text, echo } = this.message(topic);
    try {
      await send(text);
    } catch (err) {
      // Its echo's wait ends on its own timer.
      onError?.(err as Error);
      return;
    }
    await echo;
  }

  /** A message for `topic` and a promise of its echo, resolved when it comes back or after `echoTimeoutMs`. */
  message(topic: string): { text: string; echo: Promise<void> } {
    return this.echoed(topic, this.echoTimeoutMs, (resolve) => resolve());
  }

  /**
   * A message that only proves the way back (topic `heartbeat`, which nobody subscribes to):
   * `heard` resolves when it comes back, and rejects after `ms`.
   */
  probe(ms: number): { text: string; heard: Promise<void> } {
    const { text, echo } = this.echoed('heartbeat', ms, (_resolve, reject) =>
      reject(new Error(`no answer within ${ms} ms: a notification sent did not come back`)),
    );
    return { text, heard: echo };
  }

  private echoed(
    topic: string,
    ms: number,
    late: (resolve: () => void, reject: (e: Error) => void) => void,
  ): { text: string; echo: Promise<void> } {
    const id = `${this.sender}.${++this.seq}`;
    const echo = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        late(resolve, reject);
      }, ms);
      timer.unref();
      this.waiting.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return { text: `${topic} ${id}`, echo };
  }

  deliver(text: string): void {
    const [topic, id] = text.split(' ');
    for (const fn of this.subscribers.get(topic ?? '') ?? []) fn();
    if (id !== undefined) {
      this.waiting.get(id)?.();
      this.waiting.delete(id);
    }
  }

  /** After a reconnection: anything may have been missed, so every subscriber forgets. */
  deliverAll(): void {
    for (const fns of this.subscribers.values()) for (const fn of fns) fn();
  }

  /** Resolves everything still waiting (at close). */
  release(): void {
    for (const done of this.waiting.values()) done();
    this.waiting.clear();
  }
}

/**
 * How often the listening connection must hear a notification sent through the pool, as the
 * other processes send theirs, and how long that (or opening it and its LISTEN) may take. A path
 * that a NAT or a load balancer dropped without a word (no FIN, no RST) looks alive to both ends,
 * and a LISTEN through a pooler in transaction mode is accepted and then hears (almost) nothing;
 * unheard, the connection is counted lost. A cut just after a beat is noticed at the next one's
 * end: within two intervals, 10 s.
 */
export const HEARTBEAT_MS = 5_000;
