// The Broadcast over Redis pub/sub (CERTDESK_REDIS_URL), and the heartbeat that proves a Redis
// connection alive.
import type { Redis } from 'ioredis';
import type { Broadcast } from './broadcast.js';
import { withinTime } from '../core/index.js';
import { HEARTBEAT_MS, Hub } from './broadcast-hub.js';

/**
 * Proves a Redis connection alive with a PING every `intervalMs` (HEARTBEAT_MS), answered within
 * as long (and within the client's own command timeout, if it has one). ioredis notices a closed
 * connection, but not a path dropped without a word (a NAT or a load balancer that forgot the
 * flow): every command on it fails by its timeout, and a subscriber hears nothing, until TCP
 * keepalive gives up minutes later. After `misses` unanswered PINGs in a row the connection is
 * dropped and ioredis opens a new one. Skipped while the connection is not ready (ioredis is at
 * it). Returns the stop.
 */
export function redisHeartbeat(
  client: Redis,
  onLost: (err: Error) => void,
  options: { intervalMs?: number; misses?: number } = {},
): () => void {
  const intervalMs = options.intervalMs ?? HEARTBEAT_MS;
  let beat: NodeJS.Timeout | undefined;
  let stopped = false;
  let missed = 0;
  let connectedBeats = 0;
  const miss = (err: Error) => {
    if (stopped) return;
    if (++missed >= (options.misses ?? 1)) {
      missed = 0;
      onLost(err);
      // Dropped and opened again (ioredis's own reconnection).
      client.disconnect(true);
    }
    next();
  };
  const next = () => {
    if (stopped) return;
    beat = setTimeout(() => {
      // Connected but not ready at two beats in a row (its first command unanswered) is a miss
      // too: ioredis would wait on it for good. Connecting has its own timeout, and reconnecting
      // is ioredis at work.
      connectedBeats = client.status === 'connect' ? connectedBeats + 1 : 0;
      if (connectedBeats >= 2) {
        connectedBeats = 0;
        return miss(new Error('Redis: connected, but no answer to its first command'));
      }
      if (client.status !== 'ready') return next();
      withinTime(client.ping(), intervalMs, 'Redis').then(() => {
        missed = 0;
        next();
      }, miss);
    }, intervalMs);
    beat.unref();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(beat);
  };
}

/**
 * Redis pub/sub (CERTDESK_REDIS_URL) on `channel`: a subscriber connection of its own, which
 * ioredis opens again when it closes and `redisHeartbeat` when its path dies silently. It
 * subscribes on every (re)connection itself, and only once that is answered does it count as
 * listening; then every subscriber forgets, since news may have been missed meanwhile. Its
 * commands have no timeout of their own (the publisher's would turn a slow SUBSCRIBE after a
 * reconnection into an unhandled rejection): the heartbeat's deadline bounds them.
 */
export async function redisBroadcast(
  publisher: Redis,
  channel: string,
  options: { echoTimeoutMs?: number; heartbeatMs?: number; onError?: (err: Error) => void } = {},
): Promise<Broadcast> {
  const hub = new Hub(options.echoTimeoutMs ?? 1000);
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const subscriber = publisher.duplicate({ autoResubscribe: false, commandTimeout: undefined });
  const onError = (err: Error) => options.onError?.(err);
  subscriber.on('error', onError);
  subscriber.on('message', (from: string, text: string) => {
    if (from === channel) hub.deliver(text);
  });
  let subscribed = false;
  let first = true;
  const subscribe = async () => {
    await withinTime(subscriber.subscribe(channel), heartbeatMs, 'subscribing to the Redis broadcast');
    subscribed = true;
    if (!first) hub.deliverAll();
    first = false;
  };
  subscriber.on('close', () => {
    subscribed = false;
  });
  subscriber.on('ready', () => {
    if (first) return; // the first subscription is made below
    subscribe().catch((err: Error) => {
      onError(err);
      subscriber.disconnect(true);
    });
  });
  try {
    await subscribe();
  } catch (err) {
    subscriber.disconnect();
    throw err;
  }
  const stopBeat = redisHeartbeat(subscriber, onError, { intervalMs: heartbeatMs });
  return {
    publish: (topic) => hub.announce(topic, (text) => publisher.publish(channel, text), options.onError),
    subscribe: (topic, fn) => hub.subscribe(topic, fn),
    transport: 'redis',
    listening: () => subscribed && subscriber.status === 'ready',
    async close() {
      stopBeat();
      hub.release();
      subscriber.disconnect();
    },
  };
}
