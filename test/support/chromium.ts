// Debian's chromium driven by playwright-core (never a downloaded browser), for the web
// interface's end-to-end tests; and axe-core run in a page.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createTestContext } from './app.js';
import { testDialects } from './databases.js';
import { startDnsServer } from './dns-server.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];

/** Where the tests put their screenshots (.tmp/, not kept; one of each main screen is copied to docs/screenshots). */
export const SCREENSHOTS = resolve(import.meta.dirname, '../../.tmp/screenshots');

/** Chromium, or why not: missing in CI (`CI` set, .ci/run installs it) fails; elsewhere the caller skips with the reason printed. */
export function chromiumPresent(): boolean {
  if (existsSync(CHROMIUM)) return true;
  const reason = `browser tests not run: ${CHROMIUM} not found (apt-get install chromium)`;
  if (process.env.CI) throw new Error(reason);
  console.warn(reason);
  return false;
}

export async function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

const axeSource = readFileSync(join(createRequire(import.meta.url).resolve('axe-core'), '../axe.min.js'), 'utf8');

/**
 * axe-core's serious and critical violations on `page` (its context must bypass the page's CSP,
 * which rightly forbids the injected script).
 */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ content: axeSource });
  const result = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: { run(): Promise<{ violations: { id: string; impact: string; help: string }[] }> };
      }
    ).axe;
    return (await axe.run()).violations;
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help}`);
}

/**
 * What a browser test of the pages needs: a loopback DNS server, the service over real HTTP
 * (SQLite, the CA with 2048-bit roots, limits out of the way), one customer, and chromium.
 */
export async function browserSite(customerName: string) {
  const dns = await startDnsServer();
  const t = await createTestContext(testDialects()[0]!, {
    CERTDESK_DNS_SERVERS: dns.address,
    CERTDESK_RATE_LIMIT: '1000000',
    CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000',
  });
  await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
  const customer = await t.customer({ name: customerName, creditLimit: 100000 });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  const browser = await launchChromium();
  return {
    t,
    dns,
    customer,
    base,
    browser,
    async close() {
      await browser.close();
      await t.close();
      await dns.close();
    },
  };
}
