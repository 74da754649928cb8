import type { FastifyReply } from 'fastify';
import { isRefusal } from '../../../core/index.js';
import type { Users } from '../../../ra/accounts/users.js';
import type { HashStore } from '../../../ra/hash-store/hash-store.js';
import type { App } from '../../types.js';
import { escapeHtml } from '../page.js';
import { consolePage, consoleRoutes, failure, field, notice, type Console, type ConsoleDeps } from './context.js';
import { registerOrderScreens } from './orders.js';
import { registerOrdering } from './ordering.js';
import { registerTeamScreens } from './team.js';
import { registerVoucherScreens } from './vouchers.js';

// The person's own profile (language, time zone, password; the second factor has its own page),
// and the registration of every console screen.

const LOCALES = [
  ['en_US', 'English (US)'],
  ['en_GB', 'English (UK)'],
  ['de_DE', 'Deutsch (Deutschland)'],
  ['de_AT', 'Deutsch (Österreich)'],
  ['de_CH', 'Deutsch (Schweiz)'],
] as const;
const ZONES = Intl.supportedValuesOf('timeZone');

async function profileScreen(c: Console, reply: FastifyReply, status = 200, top = ''): Promise<FastifyReply> {
  const t = c.t;
  const profile = await c.api('GET', '/Profile');
  const locale = String(profile.body.Locale ?? '');
  const body =
    top +
    notice(c) +
    `<dl class="facts"><dt>${t.username}</dt><dd>${escapeHtml(c.user.username)}</dd>` +
    `<dt>${t.fullName}</dt><dd>${escapeHtml(c.user.fullName)}</dd><dt>${t.emailAddress}</dt><dd>${escapeHtml(c.user.email)}</dd>` +
    `<dt>${t.roles}</dt><dd>${escapeHtml(c.user.roles.join(', '))}</dd>` +
    `<dt>${t.twoFactor}</dt><dd>${c.user.twoFactorEnabled ? t.twoFactorOn : `<a href="/account/two-factor?lang=${c.lang}">${t.twoFactorOff}</a>`}</dd></dl>` +
    `<h2>${t.locale} · ${t.timezone}</h2><form method="post" action="${c.href('/profile')}">${c.csrfField()}` +
    `<label for="locale">${t.locale}</label><select id="locale" name="locale">` +
    LOCALES.map(([v, label]) => `<option value="${v}"${v === locale ? ' selected' : ''}>${label}</option>`).join('') +
    `</select><label for="timezone">${t.timezone}</label><select id="timezone" name="timezone">` +
    ZONES.map((z) => `<option${z === c.timeZone ? ' selected' : ''}>${escapeHtml(z)}</option>`).join('') +
    `</select><p><button type="submit">${t.save}</button></p></form>` +
    `<h2>${t.changePassword}</h2><form method="post" action="${c.href('/profile/password')}">${c.csrfField()}` +
    `<input type="hidden" name="username" value="${escapeHtml(c.user.username)}" autocomplete="username">` +
    `<label for="current">${t.password}</label><input id="current" name="current" type="password" required maxlength="1024" autocomplete="current-password">` +
    `<label for="new">${t.newPassword}</label><input id="new" name="new" type="password" required maxlength="1024" autocomplete="new-password">` +
    `<p><button type="submit">${t.changePassword}</button></p></form>`;
  return consolePage(reply, c, status, t.profile, body);
}

/** Runs an own-profile change; a refusal is shown on the profile, as the ra layer worded it. */
async function ownChange(
  c: Console,
  reply: FastifyReply,
  run: () => Promise<unknown>,
  after: () => FastifyReply,
): Promise<FastifyReply> {
  try {
    await run();
  } catch (e) {
    if (!isRefusal(e)) throw e;
    return profileScreen(c, reply, 400, failure(e.message));
  }
  return after();
}

export function registerConsole(
  app: App,
  deps: ConsoleDeps & {
    users: Pick<Users, 'updateOwn'>;
    hashStore: Pick<HashStore, 'listKeys' | 'createKey' | 'revokeKey'>;
  },
): void {
  const routes = consoleRoutes(app, deps);
  registerOrdering(routes);
  registerOrderScreens(routes);
  registerVoucherScreens(routes);
  registerTeamScreens(routes, deps);
  routes.get('/profile', (c, reply) => profileScreen(c, reply));
  routes.post('/profile', async (c, reply) =>
    ownChange(
      c,
      reply,
      async () =>
        deps.users.updateOwn(
          { principal: await c.principal(), clientAddress: c.request.ip },
          { Locale: field(c.request, 'locale'), Timezone: field(c.request, 'timezone') },
        ),
      // The new language shows at once: the redirect does not carry the old one.
      () => reply.redirect('/profile?done=saved', 303),
    ),
  );
  routes.post('/profile/password', async (c, reply) =>
    ownChange(
      c,
      reply,
      async () =>
        deps.users.updateOwn(
          { principal: await c.principal(), clientAddress: c.request.ip },
          {
            Password: String((c.request.body as { new?: unknown }).new ?? ''),
            CurrentPassword: String((c.request.body as { current?: unknown }).current ?? ''),
          },
        ),
      // A new password ends every session of the person, this one too: sign in again.
      () => reply.redirect('/signin?next=%2Fprofile', 303),
    ),
  );
}
