// Admin and service commands of the `certdesk` binary.
import { Command, CommanderError } from 'commander';
import { parseCustomer, strictNumber } from './args.js';
import { lines, print } from './print.js';
import { ConfigError, loadConfig, type Config } from '../config/index.js';
import { isCertdeskError, parseScopes } from '../core/index.js';
import { createServices, run, type Roles, type Services } from '../main.js';
import { addCaCommands } from './ca-commands.js';
import { addKvCommands } from './kv-commands.js';
import { addMailCommands } from './mail-commands.js';
import { addVettingCommands } from './vetting-commands.js';
import { migrateToLatest, openDatabase } from '../storage/index.js';
import { databaseUrl } from '../main.js';


async function withServices<T>(fn: (s: Services) => Promise<T>): Promise<T> {
  const services = await createServices(loadConfig());
  try {
    return await fn(services);
  } finally {
    await services.close();
  }
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
        await run(config, roles);
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
  roleCommand('serve', 'run the API, the job worker and the hash store in one process', (c) => ({ api: true, worker: c.worker, kv: true }));
  roleCommand('worker', 'run the job worker only', () => ({ api: false, worker: true, kv: false }));
  roleCommand('kv', 'run the hash store listener only', () => ({ api: false, worker: false, kv: true }));

  program
    .command('migrate')
    .description('bring the database schema up to date')
    .action(async () => {
      const config = loadConfig();
      const db = await openDatabase({ url: databaseUrl(config) });
      try {
        const applied = await migrateToLatest(db);
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
    .action(async (o: { name: string; email: string; currency: string; creditLimit: string; country: string; locale?: string; timezone: string; json?: boolean }) => {
      const created = await withServices((s) =>
        s.accounts.createCustomer({
          name: o.name, email: o.email, currency: o.currency.toUpperCase(), creditLimit: strictNumber(o.creditLimit),
          country: o.country.toUpperCase(), locale: o.locale, timezone: o.timezone,
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
      print(o.json === true, out, lines(out) +
        '\n\nThe password and client secret are shown only now; store them safely.');
    });
  customer
    .command('list')
    .description('list customers')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const list = await withServices((s) => s.accounts.listCustomers());
      print(o.json === true, { Customers: list }, list.map((c) => `${c.id}\t${c.currency}\t${c.name}\t${c.email}`).join('\n'));
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
      const out = { CustomerID: application.customerId, client_id: application.clientId, client_secret: clientSecret, scopes: scopes.join(' ') };
      print(o.json === true, out, lines(out));
    });

  addKvCommands(program, async () => {
    const services = await createServices(loadConfig());
    return { hashStore: services.hashStore, close: () => services.close() };
  });
  addCaCommands(program, async () => {
    const config = loadConfig();
    const services = await createServices(config);
    return { ca: services.ca, catalog: services.catalog, keyBits: { rsaRootBits: config.caRsaRootBits, rsaIntermediateBits: config.caRsaIntermediateBits }, close: () => services.close() };
  });
  addVettingCommands(program, async () => {
    const services = await createServices(loadConfig());
    return { vetting: services.vetting, close: () => services.close() };
  });
  addMailCommands(program, async () => {
    const services = await createServices(loadConfig());
    return { mail: services.mailRepo, close: () => services.close() };
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
