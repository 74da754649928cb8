// Admin and service commands of the `certdesk` binary. The composition root (src/main.ts) and the
// modules behind it load only once a command runs, so that a first `serve` can start making its CA
// root keys while they load (rootKeysMadeAhead). Only `ca init`, `ca distrust` (the replacement)
// and a first `serve`/`worker` make CA keys; every other command only opens the stored ones.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import { parseCustomer, strictNumber } from './args.js';
import { lines, print } from './print.js';
import { keyPairsMadeAhead, type KeyPairSource } from '../ca/key-pairs.js';
import { ConfigError, loadConfig, type Config } from '../config/index.js';
import { formatTimestamp, isCertdeskError, parseScopes } from '../core/index.js';
import type { Services } from '../main.js';
import type { Roles } from '../run.js';
import { addCaCommands } from './ca-commands.js';
import { addKvCommands } from './kv-commands.js';
import { addMailCommands } from './mail-commands.js';
import { addOperatorCommands } from './operator-commands.js';
import { addOrphansCommand } from './orphans-command.js';
import { addVettingCommands } from './vetting-commands.js';
import { addVoucherCommands } from './voucher-commands.js';

/** The composition root, loaded on first use. */
const composition = () => import('../main.js');

async function openServices(config: Config = loadConfig()): Promise<Services> {
  return (await composition()).createServices(config);
}

async function withServices<T>(fn: (s: Services) => Promise<T>): Promise<T> {
  const services = await openServices();
  try {
    return await fn(services);
  } finally {
    await services.close();
  }
}

/**
 * RSA root keys made ahead for a first start, one per catalog brand (two at most), or undefined.
 * Without a CA key file yet this process either creates the CA hierarchy or stops (keys sealed
 * under another file do not open), so the roots' prime searches, seconds each, start now and
 * overlap the loading of the program instead of following it. Undefined when the key file exists
 * (a later start, or a first one after another command already opened the data directory).
 */
function rootKeysMadeAhead(config: Config): KeyPairSource | undefined {
  // The paths of caKeyFile() in main.ts and of the bundled catalog (loadCatalog).
  const keyFile =
    config.caKeyFile !== undefined && config.caKeyFile !== ''
      ? config.caKeyFile
      : join(resolve(config.dataDir), 'ca-keys.secret');
  if (existsSync(keyFile)) return undefined;
  let brands: number;
  try {
    const catalog = JSON.parse(
      readFileSync(config.catalog ?? new URL('../../catalog/default.json', import.meta.url), 'utf8'),
    ) as { brands?: unknown };
    brands = Array.isArray(catalog.brands) ? catalog.brands.length : 0;
  } catch {
    // An unreadable catalog stops the start in a moment, with its reason.
    return undefined;
  }
  // Two at most: libuv's thread pool has four threads, and the module loader reads files through it.
  return keyPairsMadeAhead(
    Array.from({ length: Math.min(brands, 2) }, () => ({ type: 'rsa', bits: config.caRsaRootBits })),
  );
}

export function buildCli(): Command {
  const program = new Command('certdesk').description('Certificate ordering and management service').exitOverride();

  const roleCommand = (name: string, description: string, rolesOf: (config: Config) => Roles) =>
    program
      .command(name)
      .description(description)
      .action(async () => {
        const config = loadConfig();
        const roles = rolesOf(config);
        const keyPairs = roles.api || roles.worker ? rootKeysMadeAhead(config) : undefined;
        await (await import('../run.js')).run(config, roles, keyPairs === undefined ? {} : { keyPairs });
        const parts = [
          roles.api ? `certdesk listening on ${config.publicUrl}` : undefined,
          roles.kv && config.kvPort !== 0 ? `hash store listening on port ${config.kvPort}` : undefined,
          roles.worker ? 'job worker running' : undefined,
        ].filter(Boolean);
        // For the person at the terminal: stderr, so stdout stays pure JSON log lines.
        process.stderr.write(`${parts.join('\n')}\n`);
        if (roles.api) {
          process.stderr.write(
            'Create the first customer with:\n' +
              '  ./bin/certdesk customer create --name "Example Ltd" --email ops@example.org --currency EUR --credit-limit 5000 --json\n',
          );
        }
      });
  roleCommand('serve', 'run the API, the job worker and the hash store in one process', (c) => ({
    api: true,
    worker: c.worker,
    kv: true,
  }));
  roleCommand('api', 'run the API only (several may share one PostgreSQL database)', () => ({
    api: true,
    worker: false,
    kv: false,
  }));
  roleCommand('worker', 'run the job worker only', () => ({ api: false, worker: true, kv: false }));
  roleCommand('kv', 'run the hash store listener only', () => ({ api: false, worker: false, kv: true }));

  program
    .command('migrate')
    .description('bring the database schema up to date')
    .action(async () => {
      const config = loadConfig();
      const { migrateToLatest, openDatabase } = await import('../storage/index.js');
      const db = await openDatabase({
        url: (await composition()).databaseUrl(config),
        prepared: config.databasePrepared,
        // A migration may rewrite a large table: no bound on its statements' answers, here or on the server.
        migrating: true,
      });
      try {
        const applied = await migrateToLatest(db, {
          onLockWait: ({ migration, attempt, attempts }) =>
            process.stderr.write(
              `${migration}: other transactions hold locks it needs; trying again (${attempt} of ${attempts})\n`,
            ),
        });
        process.stdout.write(applied.length === 0 ? 'schema is up to date\n' : `applied: ${applied.join(', ')}\n`);
      } finally {
        await db.close();
      }
    });

  const customer = program.command('customer').description('manage customers');
  customer
    .command('create')
    .description('register a customer with an ADMIN user and an API application holding every scope')
    .requiredOption('--name <name>', 'customer name')
    .requiredOption('--email <email>', 'contact e-mail')
    .requiredOption('--currency <code>', 'account currency (ISO 4217)')
    .requiredOption('--credit-limit <amount>', 'credit limit in the account currency')
    .option('--country <code>', 'ISO 3166 country code', 'US')
    .option('--locale <locale>', '<language>_<COUNTRY>')
    .option('--timezone <tz>', 'time zone name', 'UTC')
    .option('--json', 'print one JSON object')
    .action(
      async (o: {
        name: string;
        email: string;
        currency: string;
        creditLimit: string;
        country: string;
        locale?: string;
        timezone: string;
        json?: boolean;
      }) => {
        const created = await withServices((s) =>
          s.accounts.createCustomer({
            name: o.name,
            email: o.email,
            currency: o.currency.toUpperCase(),
            creditLimit: strictNumber(o.creditLimit),
            country: o.country.toUpperCase(),
            locale: o.locale,
            timezone: o.timezone,
          }),
        );
        const out = {
          CustomerID: created.customer.id,
          Username: created.user.username,
          Password: created.password,
          client_id: created.application.clientId,
          client_secret: created.clientSecret,
          scopes: created.application.scopes.join(' '),
        };
        print(
          o.json === true,
          out,
          lines(out) + '\n\nThe password and client secret are shown only now; store them safely.',
        );
      },
    );
  customer
    .command('list')
    .description('list customers')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const list = await withServices((s) => s.accounts.listCustomers());
      print(
        o.json === true,
        { Customers: list },
        list.map((c) => `${c.id}\t${c.currency}\t${c.name}\t${c.email}`).join('\n'),
      );
    });

  customer
    .command('password-policy')
    .description("set the least length of a customer's users' passwords (default 12)")
    .requiredOption('--customer <id>', 'customer id')
    .requiredOption('--min-length <n>', 'a whole number from 8 to 128')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; minLength: string; json?: boolean }) => {
      const customerId = parseCustomer(o.customer);
      await withServices((s) => s.accounts.setPasswordMinLength(customerId, Number(o.minLength)));
      const out = { CustomerID: customerId, PasswordMinLength: Number(o.minLength) };
      print(o.json === true, out, lines(out));
    });

  customer
    .command('two-factor')
    .description('require (or not) a second factor when the users of a customer sign in')
    .requiredOption('--customer <id>', 'customer id')
    .requiredOption('--require <on|off>', 'on or off')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; require: string; json?: boolean }) => {
      const customerId = parseCustomer(o.customer);
      if (o.require !== 'on' && o.require !== 'off') throw new Error('--require is on or off');
      await withServices((s) => s.accounts.setRequireTwoFactor(customerId, o.require === 'on'));
      const out = { CustomerID: customerId, RequireTwoFactor: o.require === 'on' };
      print(o.json === true, out, lines(out));
    });

  program
    .command('audit')
    .description('the audit log')
    .command('list')
    .description("a customer's audit events, newest first")
    .requiredOption('--customer <id>', 'customer id')
    .option('--limit <n>', 'at most this many (1 to 10000)', '100')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; limit: string; json?: boolean }) => {
      const customerId = parseCustomer(o.customer);
      const limit = Number(o.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new Error('--limit is a whole number from 1 to 10000');
      const events = await withServices((s) => s.accounts.auditEvents(customerId, limit));
      const shown = events.map((e) => ({
        Id: e.id,
        At: formatTimestamp(e.at),
        Actor: e.actor,
        ClientAddress: e.clientAddress,
        Action: e.action,
        Subject: e.subject,
        ...(e.details === undefined ? {} : { Details: e.details }),
      }));
      print(
        o.json === true,
        { Events: shown },
        shown.map((e) => `${e.At}\t${e.Action}\t${e.Subject}\t${e.Actor}\t${e.ClientAddress ?? '-'}`).join('\n'),
      );
    });

  program
    .command('app')
    .description('manage API applications')
    .command('create')
    .description('create an API application (client_id/client_secret) for a customer')
    .requiredOption('--customer <id>', 'customer id')
    .requiredOption('--scopes <list>', 'comma-separated scopes: profile,limit,read,quote,order,voucher,write')
    .option('--name <name>', 'application name', 'api')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; scopes: string; name: string; json?: boolean }) => {
      const { scopes, unknown } = parseScopes(o.scopes);
      if (unknown.length > 0) throw new Error(`unknown scopes: ${unknown.join(', ')}`);
      const customerId = parseCustomer(o.customer);
      const { application, clientSecret } = await withServices((s) =>
        s.accounts.createApplication({ customerId, scopes, name: o.name }),
      );
      const out = {
        CustomerID: application.customerId,
        client_id: application.clientId,
        client_secret: clientSecret,
        scopes: scopes.join(' '),
      };
      print(o.json === true, out, lines(out));
    });

  addKvCommands(program, async () => {
    const services = await openServices();
    return { hashStore: services.hashStore, close: () => services.close() };
  });
  addCaCommands(program, async () => {
    const config = loadConfig();
    const services = await openServices(config);
    return {
      ca: services.ca,
      catalog: services.catalog,
      keyBits: { rsaRootBits: config.caRsaRootBits, rsaIntermediateBits: config.caRsaIntermediateBits },
      close: () => services.close(),
    };
  });
  addOrphansCommand(
    program.commands.find((c) => c.name() === 'ca')!,
    async () => {
      const services = await openServices();
      return { reconciliation: services.reconciliation, close: () => services.close() };
    },
  );
  addVettingCommands(program, async () => {
    const services = await openServices();
    return { vetting: services.vetting, close: () => services.close() };
  });
  addVoucherCommands(program, async () => {
    const services = await openServices();
    return { vouchers: services.vouchers, close: () => services.close() };
  });
  addMailCommands(program, async () => {
    const services = await openServices();
    return { mail: services.mailRepo, mailer: services.mailer, close: () => services.close() };
  });
  addOperatorCommands(program, async () => {
    const services = await openServices();
    return { operators: services.operators, close: () => services.close() };
  });
  return program;
}

/** Runs the CLI; errors print one clear line (and every bad configuration key) and exit non-zero. */
export async function runCli(argv: string[]): Promise<void> {
  try {
    await buildCli().parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode;
      return;
    }
    const message = e instanceof ConfigError || isCertdeskError(e) || e instanceof Error ? e.message : String(e);
    process.stderr.write(`certdesk: ${message}\n`);
    process.exitCode = 1;
  }
}

await runCli(process.argv);
