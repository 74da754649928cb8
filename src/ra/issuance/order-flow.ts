import {
  newHolderId,
  CertdeskError,
  orderId as toOrderId,
  type FailedMinorStatus,
  type JobId,
  type MinorStatus,
  type OrderName,
  type Order,
  type Principal,
} from '../../core/index.js';
import type { AuditRepo, JobsRepo, OrderNamesRepo } from '../../storage/index.js';
import type { DcvResolver, FileCheckOptions } from '../../validation/index.js';
import { IssuanceRounds, type Completed, type IssueOptions, type RoundsDeps } from './issuance-rounds.js';
import { ProofChecks } from './proof-checks.js';

export { ISSUANCE_CLAIM_SECONDS, type Completed, type FlowRepos, type IssueOptions } from './issuance-rounds.js';

const DAY = 86_400;
/** DESIGN §5.4: an order whose names are not validated within 30 days FAILs with DCV_EXPIRED. */
export const DCV_DEADLINE = 30 * DAY;
/** The minor statuses in which an order waits for its names to be shown. */
const AWAITING_PROOF: readonly MinorStatus[] = ['WF_DNS_AUTH', 'WF_FILE_AUTH', 'WF_EMAIL_AUTH'];
/** When the job looks again at an order whose issuance another actor holds. */
export const HELD_RECHECK_SECONDS = 5;

export interface OrderFlowDeps extends RoundsDeps {
  readonly orderNames: Pick<OrderNamesRepo, 'names' | 'recordCheck' | 'proofState'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly resolver: DcvResolver;
  readonly file: Omit<FileCheckOptions, 'resolve'>;
  readonly jobs: Pick<JobsRepo, 'enqueue' | 'rescheduleInTransaction'>;
  /** This process as the holder of issuance claims (default `newHolderId()`). */
  readonly holder?: string;
}

/** When to look again: soon after the order, then less and less often (the proof may take a while to appear). */
export function nextCheckDelay(ageSeconds: number): number {
  if (ageSeconds < 600) return 60;
  if (ageSeconds < 3600) return 300;
  if (ageSeconds < DAY) return 1800;
  return 6 * 3600;
}

/**
 * What happens to an order after it is placed (DESIGN §2 flow): the worker's `order.validate`
 * checks each pending name (DNS or FILE; EMAIL waits for the approver), records the results,
 * and when every name is shown moves the order on: OV/EV to the operator's vetting, DV to
 * issuance, which re-checks CAA, signs through the Issuer and completes the order. Every step is
 * a guarded transition, so a job run twice (a crash, a lost lease) changes nothing twice.
 */
export class OrderFlow {
  /** The DNS records, files and CAA an order's names are checked against (POST /Order uses them too). */
  readonly proofs: ProofChecks;
  private readonly rounds: IssuanceRounds;

  constructor(private readonly deps: OrderFlowDeps) {
    this.proofs = new ProofChecks(deps);
    this.rounds = new IssuanceRounds(deps, deps.holder ?? newHolderId(), this.proofs);
  }

  /** Job `order.validate`. */
  async validate(payload: { readonly orderId: number }, ctx: { readonly id: JobId }): Promise<void> {
    const order = await this.deps.orders.byId(toOrderId(payload.orderId));
    if (order === undefined || (order.majorStatus !== 'PENDING' && order.majorStatus !== 'REISSUE')) return;
    const now = this.deps.clock.nowSeconds();
    const minor = order.minorStatus;
    let outcome: 'done' | 'held' = 'done';
    if (AWAITING_PROOF.includes(minor)) {
      const pending = await this.checkPendingNames(order, 'system', now);
      if (pending.length > 0) {
        const since = order.reissuedAt ?? order.orderDate;
        if (now - since >= DCV_DEADLINE)
          return this.fail(
            order,
            minor,
            'DCV_EXPIRED',
            `not validated within 30 days: ${pending.map((n) => n.name).join(', ')}`,
          );
        await this.deps.jobs.enqueue(
          {
            name: 'order.validate',
            payload,
            uniqueKey: `order:${order.id}`,
            runAt: now + nextCheckDelay(now - since),
            takeKeyFrom: ctx.id,
          },
          now,
        );
        return;
      }
      outcome = await this.advance(order);
    } else if (minor === 'WF_ISSUANCE') {
      outcome = await this.issue(order);
    }
    // Another actor holds the issuance (most often POST /Order signing inline): look again shortly,
    // in case it disappears and its claim has to be taken over.
    if (outcome === 'held') {
      await this.deps.jobs.enqueue(
        {
          name: 'order.validate',
          payload,
          uniqueKey: `order:${order.id}`,
          runAt: now + HELD_RECHECK_SECONDS,
          takeKeyFrom: ctx.id,
        },
        now,
      );
    }
  }

  /**
   * "Check now" (the web interface, POST /CheckDCV): checks the order's pending DNS and FILE names
   * at once, as the worker would, and moves the order on when every name is shown. The worker's
   * schedule is left as it is; a check racing the worker's records the same results, and the
   * guarded transitions let only one of them move the order.
   */
  async checkNow(principal: Principal, id: number): Promise<void> {
    const order = await this.deps.orders.get(principal.customerId, toOrderId(id));
    if (order === undefined)
      throw new CertdeskError('orderNotFound', `Invalid order id ${id}: no such order.`, { field: 'ServiceOrderID' });
    if (
      (order.majorStatus !== 'PENDING' && order.majorStatus !== 'REISSUE') ||
      !AWAITING_PROOF.includes(order.minorStatus)
    )
      return;
    const pending = await this.checkPendingNames(order, `user:${principal.userId}`, this.deps.clock.nowSeconds());
    if (pending.length === 0) await this.advanceForPerson(order);
  }

  /** Checks each pending DNS or FILE name of an order and records the result; returns the names still not shown. */
  private async checkPendingNames(order: Order, actor: string, now: number): Promise<OrderName[]> {
    for (const n of await this.deps.orderNames.names([order.id])) {
      if (n.status !== 'PENDING' || n.method === 'EMAIL') continue;
      const result = await this.proofs.checkProof(order, n.name, n.method);
      await this.deps.orderNames.recordCheck(n.id, {
        validated: result.ok,
        at: now,
        problem: result.ok ? null : result.problem,
      });
      await this.deps.audit.append({
        at: now,
        customerId: order.customerId,
        actor,
        clientAddress: null,
        action: result.ok ? 'dcv.validated' : 'dcv.checked',
        subject: String(order.id),
        details: { name: n.name, method: n.method, ...(result.ok ? {} : { problem: result.problem }) },
      });
    }
    return (await this.deps.orderNames.names([order.id])).filter((n) => n.status !== 'VALIDATED');
  }

  /**
   * Every name shown: OV/EV on to the operator's vetting, DV on to issuance (done here). Called by
   * the worker, by "check now" and by an approver's click; the guarded transition lets only one of
   * them proceed. The names and the status are read together and the transition is guarded by the
   * row's version: a reissue that replaced the names meanwhile (same status, new names to show)
   * makes it fail, and another look finds them pending.
   */
  async advance(order: Order): Promise<'done' | 'held'> {
    for (let look = 0; look < 3; look++) {
      const state = await this.deps.orderNames.proofState(order.id);
      if (state === undefined || (state.major !== 'PENDING' && state.major !== 'REISSUE')) return 'done';
      // A round already awaiting issuance (a reissue of names all still shown): the claim's
      // holder checks the names itself.
      if (state.minor === 'WF_ISSUANCE')
        return this.issue({ ...order, majorStatus: state.major, minorStatus: state.minor });
      if (state.minor === 'WF_ORG_VALIDATION' || !state.allShown) return 'done';
      const now = this.deps.clock.nowSeconds();
      // A reissue keeps the organization vetted for the order: only a new order waits for vetting.
      if (state.major === 'PENDING' && (order.validationLevel === 'OV' || order.validationLevel === 'EV')) {
        if (await this.deps.orders.markAwaitingVetting(order.id, state.minor, state.version, now)) return 'done';
      } else if (await this.deps.orders.markAwaitingIssuance(order.id, state, now)) {
        return this.issue({ ...order, majorStatus: state.major, minorStatus: 'WF_ISSUANCE' });
      }
      // The row moved between the read and the transition: look again.
    }
    return 'done';
  }

  /**
   * `advance` for a person's request ("check now", an approver's click): what they did is recorded,
   * and a failure the order's job retries (a CAA lookup unanswered, the CA not ready) is logged
   * rather than answered as the request's own: the job moves the order on.
   */
  async advanceForPerson(order: Order): Promise<void> {
    try {
      await this.advance(order);
    } catch (e) {
      this.deps.logger?.warn({ err: e, orderId: order.id }, 'moving the order on failed; its job tries again');
    }
  }

  /** Signs the order's current issuance round and completes the order (`IssuanceRounds.issue`). */
  issue(order: Order, options: IssueOptions = {}): Promise<'done' | 'held'> {
    return this.rounds.issue(order, options);
  }

  /** A claim to store with a new order awaiting issuance (`IssuanceRounds.newClaim`). */
  newClaim(): { claim: string; until: number } {
    return this.rounds.newClaim();
  }

  /** `issue` for a new order stored with its claim (`IssuanceRounds.issueClaimed`). */
  issueClaimed(
    order: Order,
    names: readonly string[],
    claim: string,
    options: IssueOptions = {},
  ): Promise<Completed | undefined> {
    return this.rounds.issueClaimed(order, names, claim, options);
  }

  /** FAILED with a reason; the charge is refunded (`IssuanceRounds.fail`). */
  fail(order: Order, from: MinorStatus, minor: FailedMinorStatus, reason: string): Promise<void> {
    return this.rounds.fail(order, from, minor, reason);
  }
}
