import {
  CertdeskError,
  isRefusal,
  dcvReuseSeconds,
  waitingFor,
  type Clock,
  type JobId,
  type Order,
  type OrderDcvMethod,
  type OrderId,
  type OrderParameters,
} from '../../core/index.js';
import {
  ensureRecurring,
  type DcvValuesRepo,
  type JobsRepo,
  type NewOrderName,
  type OrderQueriesRepo,
} from '../../storage/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dcvExpectations, type DcvExpectations } from '../dcv/dcv-details.js';
import type { EmailApprovals } from '../dcv/email-approval.js';
import type { MailWrites, Mailer } from '../mail/mail.js';
import { contactAddresses } from '../mail/notify.js';
import type { OrderFlow } from '../issuance/order-flow.js';
import { actorName, type Actor } from '../accounts/actor.js';
import { ownedOrder, type LifecycleRepos } from './lifecycle.js';
import { OrderRules, type ReissueInput } from './order-rules.js';

// Reissues (spec §4.16) and the subscriptions that renew themselves by reissuing (DESIGN §5.7).

const DAY = 86_400;

export class Reissues {
  private readonly rules: OrderRules;

  constructor(
    private readonly deps: LifecycleRepos & {
      orderQueries: Pick<OrderQueriesRepo, 'subscriptionsDue'>;
      catalog: CatalogService;
      clock: Clock;
      dcvValues: Pick<DcvValuesRepo, 'getOrCreate'>;
      flow: Pick<OrderFlow, 'advance'>;
      approvals: Pick<EmailApprovals, 'mailPendingIn'>;
      blockedNames: readonly string[];
      mailer: Pick<Mailer, 'sendIn'>;
      /** The job queue outside any transaction (recurring jobs). */
      recurring: Pick<JobsRepo, 'enqueue'>;
      transact: <T>(fn: (repos: LifecycleRepos) => Promise<T>) => Promise<T>;
      /** Where a failure after a reissue's commit is reported. */
      logger?: { warn(obj: object, msg?: string): void };
    },
  ) {
    this.rules = new OrderRules(deps.catalog, deps.blockedNames);
  }

  /**
   * POST /Reissue (spec §4.16): COMPLETE and REISSUE orders only (else -2011 on ServiceOrderID).
   * A new CSR, or the original for mass replacement; names within the product's SAN rules and
   * what was paid for; validation by DVAuthMethod, or EMAIL when ReissueEmail is given. Names
   * validated within the reuse period of the Baseline Requirements are not validated again. The
   * order goes to REISSUE and keeps its certificate until the new one is issued; a reissue that
   * is still pending is replaced. Never charged.
   */
  async reissue(actor: Actor, orderId: number, input: ReissueInput): Promise<void> {
    const order = await ownedOrder(this.deps.orders, actor, orderId);
    await this.reissueOrder(order, input, { actor: actorName(actor.principal), clientAddress: actor.clientAddress });
  }

  /**
   * Subscriptions (DESIGN §5.7): an order whose term runs past its certificate gets a free reissue
   * of the same CSR before the certificate expires, until the term ends. Run daily by the worker.
   * Names still within the reuse period issue at once; the others need DCV again, and the order's
   * contacts are told by mail.
   */
  async renewDue(horizonSeconds = 30 * DAY): Promise<OrderId[]> {
    const now = this.deps.clock.nowSeconds();
    const renewed: OrderId[] = [];
    let failure: unknown;
    for (const order of await this.deps.orderQueries.subscriptionsDue(now, horizonSeconds)) {
      try {
        await this.reissueOrder(order, {}, { actor: 'system', clientAddress: null });
        renewed.push(order.id);
      } catch (e) {
        // One order's problem must not stop the others: a refusal waits for the next daily run; a
        // failure (the database) fails this run after the others had their turn, so the job is
        // retried with backoff and the order renewed then.
        if (isRefusal(e)) continue;
        failure ??= e;
        this.deps.logger?.warn({ err: e, orderId: order.id }, 'subscription renewal failed; retried with the job');
      }
    }
    if (failure !== undefined) throw failure;
    return renewed;
  }

  async scheduleRenewals(): Promise<void> {
    await ensureRecurring(this.deps.recurring, 'order.renew-subscriptions', {}, DAY, this.deps.clock.nowSeconds());
  }

  /** Job `order.renew-subscriptions`. */
  async renewJob(_payload: Record<string, never>, ctx: { readonly id: JobId }): Promise<void> {
    await this.renewDue();
    await ensureRecurring(this.deps.recurring, 'order.renew-subscriptions', {}, DAY, this.deps.clock.nowSeconds(), {
      after: ctx.id,
    });
  }

  private async reissueOrder(
    order: Order,
    input: ReissueInput,
    who: { actor: string; clientAddress: string | null },
  ): Promise<void> {
    const orderId = order.id;
    const customer = order.customerId;
    const major = order.majorStatus;
    if (major !== 'COMPLETE' && major !== 'REISSUE') {
      throw new CertdeskError(
        'invalidOrderState',
        `Order ${orderId} is ${major}: only issued orders (COMPLETE or REISSUE) can be reissued.`,
        { field: 'ServiceOrderID' },
      );
    }
    const {
      brand,
      csr,
      csrPem,
      names,
      sanHosts,
      method,
      approvers,
      signatureHashAlgorithm: sha,
    } = this.rules.checkReissue(order, input);

    // Names shown recently enough count again (BR §4.2.1); the rest are validated anew.
    const now = this.deps.clock.nowSeconds();
    const reuse = dcvReuseSeconds(now);
    const previous = await this.deps.orderNames.names([order.id]);
    const newNames: NewOrderName[] = names.map((name) => {
      const old = previous.find(
        (n) => n.name === name && n.status === 'VALIDATED' && n.validatedAt !== null && now - n.validatedAt <= reuse,
      );
      return old === undefined
        ? { name, method, status: 'PENDING', approverEmail: approvers.get(name) ?? null }
        : {
            name,
            method: old.method,
            status: 'VALIDATED',
            approverEmail: old.approverEmail,
            validatedAt: old.validatedAt,
            lastCheckedAt: old.lastCheckedAt,
          };
    });
    const allShown = newNames.every((n) => n.status === 'VALIDATED');
    const dcv = await dcvExpectations(this.deps, customer, brand, csr, names);
    const params: OrderParameters = {
      ...order.parameters,
      SubjectAltNames: sanHosts,
      DVAuthMethod: method,
      SignatureHashAlgorithm: sha,
    };
    const started = await this.deps.transact(async (tx) => {
      // The round's boundary: the newest certificate signed for the order, read with the order's
      // row held. A round in progress records its certificate holding that row too, so it is
      // either below the boundary (never adopted by this round; its own completion fails and
      // revokes it) or recorded after this commit (revoked there: its claim is gone).
      await tx.orders.hold(order.id);
      const base = await tx.orderCertificates.latestCertificate(order.id);
      const ok = await tx.orders.setPendingReissue(
        order.id,
        major,
        {
          minorStatus: allShown ? 'WF_ISSUANCE' : waitingFor(method),
          csrPem,
          csrSha256: csr.hashSha256,
          commonName: names[0]!,
          sanNames: names.slice(1),
          signatureHashAlgorithm: sha,
          dvAuthMethod: method,
          dcvValue: dcv.value,
          parameters: params,
          startedAt: now,
          baseCert: base?.id ?? null,
        },
        newNames,
      );
      if (!ok) return false;
      await tx.jobs.rescheduleInTransaction(
        { name: 'order.validate', payload: { orderId: order.id }, uniqueKey: `order:${order.id}`, runAt: now },
        now,
      );
      await tx.audit.append({
        at: now,
        customerId: customer,
        actor: who.actor,
        clientAddress: who.clientAddress,
        action: 'order.reissue',
        subject: String(order.id),
        details: {
          names,
          method,
          newCsr: csrPem !== order.csrPem,
          reused: newNames.filter((n) => n.status === 'VALIDATED').map((n) => n.name),
          replacedPending: major === 'REISSUE',
        },
      });
      // New approval links, mailed with the reissue (the ones of a replaced pending reissue withdrawn).
      if (method === 'EMAIL' && !allShown) await this.deps.approvals.mailPendingIn(tx, order);
      // A renewal the customer must act on (the DCV proof has to be shown again) starts with its mail.
      if (who.actor === 'system' && !allShown) await this.askForProof(tx, order, method, dcv, names, newNames);
      return true;
    });
    if (!started)
      throw new CertdeskError(
        'conflict',
        `Order ${orderId} changed while the reissue was being started: read it again.`,
        { field: 'ServiceOrderID' },
      );
    // The reissue is started and its job queued, which issues it should signing fail from here on
    // (the CA not ready, the database lost). The caller is not told it failed, or it would start it again.
    try {
      if (allShown) await this.deps.flow.advance((await this.deps.orders.byId(order.id))!);
    } catch (e) {
      this.deps.logger?.warn({ err: e, orderId: order.id }, 'reissue started; a step after its commit failed');
    }
  }

  /**
   * The mail of a renewal whose names must be shown again: to the order's contacts, with what to
   * publish, in the renewal's transaction (it does not start without it).
   */
  private async askForProof(
    tx: MailWrites,
    order: Order,
    method: OrderDcvMethod,
    dcv: Pick<DcvExpectations, 'dns' | 'file'>,
    names: readonly string[],
    newNames: readonly NewOrderName[],
  ): Promise<void> {
    const to = contactAddresses(order);
    const how =
      method === 'DNS'
        ? `Publish the DNS record: ${dcv.dns.Example}`
        : method === 'FILE'
          ? `Publish ${dcv.file.FilePath}${dcv.file.FileName} containing:\n${dcv.file.FileContents}`
          : 'The approver has been sent a new approval mail.';
    for (const address of to) {
      await this.deps.mailer.sendIn(tx, {
        to: address,
        kind: 'subscription.action-needed',
        customerId: order.customerId,
        orderId: order.id,
        subject: `Action needed: renew the certificate of order ${order.id} (${names[0]!})`,
        text: `The certificate of order ${order.id} expires soon and its subscription continues. Control of ${pending(newNames)} must be shown again.\n\n${how}\n`,
      });
    }
  }
}

const pending = (names: readonly NewOrderName[]) =>
  names
    .filter((n) => n.status !== 'VALIDATED')
    .map((n) => n.name)
    .join(', ');
