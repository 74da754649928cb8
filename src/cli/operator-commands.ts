// Operator accounts of the web interface's /operator screens (docs/operators.md): created only here.
import type { Command } from 'commander';
import { iso, lines, print } from './print.js';
import type { Operators } from '../ra/operators/operators.js';

export type OpenOperators = () => Promise<{ operators: Operators; close(): Promise<void> }>;

/** `operator add --username N`, `operator list`, `operator disable --username N`. */
export function addOperatorCommands(program: Command, open: OpenOperators): void {
  const operator = program.command('operator').description("operators of the web interface's /operator screens");
  const withOperators = async <T>(fn: (o: Operators) => Promise<T>): Promise<T> => {
    const opened = await open();
    try {
      return await fn(opened.operators);
    } finally {
      await opened.close();
    }
  };

  operator
    .command('add')
    .description('create an operator: prints its password and TOTP secret once')
    .requiredOption('--username <name>', '2 to 64 of a-z 0-9 . _ -')
    .option('--json', 'print one JSON object')
    .action(async (o: { username: string; json?: boolean }) => {
      const created = await withOperators((ops) => ops.add(o.username));
      const out = {
        Username: created.username,
        Password: created.password,
        TOTPSecret: created.totpSecret,
        OtpauthURI: created.otpauthUri,
      };
      print(
        o.json === true,
        out,
        `${lines(out)}\n\nAdd the secret (or the otpauth:// URI as a QR code) to an authenticator app. ` +
          'The password and the secret are shown only now; sign in at /operator/signin.',
      );
    });

  operator
    .command('list')
    .description('list operators')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const list = await withOperators((ops) => ops.list());
      const rows = list.map((x) => ({
        ID: x.id,
        Username: x.username,
        CreatedAt: iso(x.createdAt),
        DisabledAt: x.disabledAt === null ? null : iso(x.disabledAt),
      }));
      print(
        o.json === true,
        { Operators: rows },
        rows.length === 0
          ? 'no operators: create one with `certdesk operator add --username NAME`'
          : rows
              .map(
                (r) =>
                  `${r.ID}\t${r.Username}\t${r.CreatedAt}${r.DisabledAt === null ? '' : `\tdisabled ${r.DisabledAt}`}`,
              )
              .join('\n'),
      );
    });

  operator
    .command('disable')
    .description('disable an operator and end its sessions')
    .requiredOption('--username <name>', 'the operator')
    .option('--json', 'print one JSON object')
    .action(async (o: { username: string; json?: boolean }) => {
      await withOperators((ops) => ops.disable(o.username));
      const out = { Username: o.username, Disabled: true };
      print(o.json === true, out, lines(out));
    });
}
