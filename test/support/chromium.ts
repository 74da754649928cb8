// Debian's chromium driven by playwright-core (never a downloaded browser), for the web
// interface's end-to-end tests; and axe-core run in a page.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

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
