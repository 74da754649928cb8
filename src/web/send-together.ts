import type { FastifyInstance } from 'fastify';
import { checkPhaseBatches, duringHandover } from '../core/index.js';

/**
 * The responses of one event-loop turn leave together, in its check phase, after the poll phase
 * has read every request that had arrived. A response written the moment it is ready wakes a
 * client on this host (a reverse proxy, a load generator) that has just gone to sleep, once per
 * response, and the wake-up is charged to this process's write: on the benchmark machines it was
 * most of a cheap request's cost (docs/architecture.md, "Hot paths"). Written together, they wake
 * it once. Each response is written on its own: one that cannot be written (a header Node
 * refuses) is answered by the error handler, as it is without this hook, and holds back no other.
 *
 * `reply.sent` stays false until the response is written: a hook or handler that sends must
 * `return reply` (Fastify's own rule), or Fastify would go on with the request.
 */
export function sendTogether(app: FastifyInstance): void {
  const later = checkPhaseBatches<() => void>((sends) => {
    for (const send of sends) send();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    // Answered in a check phase already (GET /Order waits for one for its commit mark): at once,
    // with the others of that phase, not a turn later.
    if (duringHandover()) return done(null, payload);
    later(() => {
      try {
        done(null, payload);
      } catch (e) {
        // What Fastify does when a response throws while written without this hook: the error
        // handler answers. Should that fail too, this connection is closed; the batch goes on.
        try {
          void reply.send(e instanceof Error ? e : new Error(String(e)));
        } catch (again) {
          reply.log.error({ err: again }, 'a response could not be written; the connection is closed');
          reply.raw.destroy();
        }
      }
    });
  });
}
