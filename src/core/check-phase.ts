import { setImmediate } from 'node:timers';

/**
 * Work queued during one turn of the event loop, handed over together in its next check phase
 * (one `setImmediate` for the whole batch), after the poll phase has read everything the sockets
 * held. Used where many requests of one turn can share a step: one read of a commit mark for all
 * of them (storage `sharedMarks`), or their responses leaving together (web `sendTogether`).
 *
 * Work queued while a batch runs (in its callbacks or their promise continuations) goes into the
 * next batch, a turn later. node:timers' `setImmediate`, not the global one, and imported by name:
 * a test's fake timers replace the global and the properties of the `node:timers` module object,
 * not a named import's binding, and an immediate they never fired would stall every caller.
 */
export function checkPhaseBatches<T>(run: (batch: T[]) => void): (item: T) => void {
  let waiting: T[] = [];
  const release = () => {
    const batch = waiting;
    waiting = [];
    handingOver = true;
    run(batch);
  };
  return (item) => {
    if (waiting.push(item) !== 1) return;
    setImmediate(release);
    // Queued with the release, so it runs right after it and after every promise continuation
    // the release set off (Node runs them between two immediates), before the next poll phase.
    setImmediate(handedOver);
  };
}

let handingOver = false;
const handedOver = () => {
  handingOver = false;
};

/**
 * Whether a batch is being handed over now: in a check phase, inside a run of `checkPhaseBatches`
 * or a promise continuation it set off, so no socket is read until this code is done. Work done
 * here is already done together with the turn's other work (a response may be written at once).
 */
export function duringHandover(): boolean {
  return handingOver;
}
