// A real SMTP server on loopback (smtp-server) that parses what it receives (mailparser), for
// tests of outgoing mail: the code under test talks to it through nodemailer exactly as it would
// to the operator's mail relay.
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** A parsed mail as received, with the SMTP envelope (MAIL FROM, RCPT TO) beside its headers. */
export interface ReceivedMail extends ParsedMail {
  readonly envelope: { readonly from: string | null; readonly to: readonly string[] };
}

export interface TestSmtpServer {
  /** `smtp://127.0.0.1:PORT`, as CERTDESK_SMTP_URL wants it. */
  readonly url: string;
  /** Every mail received so far, in arrival order. */
  readonly received: ReceivedMail[];
  /** The first mail (received already or still to come) matching `predicate`; rejects after `timeoutMs`. */
  waitFor(predicate: (mail: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

const HOST = '127.0.0.1';

/** Starts a plain (no TLS, no authentication) SMTP server on an ephemeral loopback port. */
export async function startSmtpServer(): Promise<TestSmtpServer> {
  const received: ReceivedMail[] = [];
  const waiters = new Set<() => void>();

  const server = new SMTPServer({
    authOptional: true,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    // Clients that leave a connection open must not hold close() for the 30 s default.
    closeTimeout: 1_000,
    onData(stream, session, callback) {
      // smtp-server resets session.envelope once onData returns: copy it before any await.
      const { mailFrom, rcptTo } = session.envelope;
      const envelope = { from: mailFrom === false ? null : mailFrom.address, to: rcptTo.map((r) => r.address) };
      simpleParser(stream).then(
        (parsed) => {
          received.push(Object.assign(parsed, { envelope }));
          for (const wake of [...waiters]) wake();
          callback();
        },
        (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
      );
    },
  });
  // A client dropping its connection must not fail the test run.
  server.on('error', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, HOST, () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.server.address() as AddressInfo;

  let closing: Promise<void> | undefined;
  return {
    url: `smtp://${HOST}:${port}`,
    received,
    waitFor(predicate, timeoutMs = 5_000) {
      return new Promise<ReceivedMail>((resolve, reject) => {
        const check = () => {
          const found = received.find(predicate);
          if (found === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching mail within ${timeoutMs} ms (received ${received.length})`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => server.close(() => resolve()));
      return closing;
    },
  };
}
