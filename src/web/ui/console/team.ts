import type { FastifyReply } from 'fastify';
import { isRefusal, ROLES, SCOPES } from '../../../core/index.js';
import { kvKeyId } from '../../../storage/index.js';
import type { HashStore } from '../../../ra/hash-store/hash-store.js';
import { escapeHtml } from '../page.js';
import {
  consolePage,
  failure,
  field,
  fields,
  notice,
  redirectDone,
  type Console,
  type consoleRoutes,
} from './context.js';

// Users and roles (GET/POST/DELETE /User), API applications (GET /Applications, POST and DELETE
// /Application: the client secret is shown once, on the answer to the form, never again), and
// the hash-store keys of the web server modules (no REST route: the console calls the hash store
// for the signed-in ADMIN's own customer, the same rule `users` write access states).

const checkboxes = (name: string, values: readonly string[], checked: readonly string[], legend: string) =>
  `<fieldset><legend>${legend}</legend>` +
  values
    .map(
      (v) =>
        `<label class="check"><input type="checkbox" name="${name}" value="${v}"${checked.includes(v) ? ' checked' : ''}> ${v}</label>`,
    )
    .join('') +
  `</fieldset>`;

async function usersScreen(c: Console, reply: FastifyReply, status = 200, top = ''): Promise<FastifyReply> {
  const t = c.t;
  const res = await c.api('GET', '/User');
  if (!res.ok) return consolePage(reply, c, res.status, t.users, failure(res.message));
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const users: any[] = res.body.UserInfos ?? [];
  const writes = c.may('users', true);
  let body =
    top +
    notice(c) +
    `<table><thead><tr><th scope="col">${t.username}</th><th scope="col">${t.fullName}</th><th scope="col">${t.roles}</th>` +
    `<th scope="col">${t.active}</th><th scope="col">${t.twoFactor}</th><th scope="col">${t.actions}</th></tr></thead><tbody>` +
    users
      .map(
        (u) =>
          `<tr><td>${escapeHtml(String(u.Username))}</td><td>${escapeHtml(String(u.FullName))}</td>` +
          `<td>${escapeHtml((u.Roles as string[]).join(', '))}</td><td>${u.Active === true ? t.yes : t.no}</td>` +
          `<td>${u.TwoFactorEnabled === true ? t.yes : t.no}</td><td>` +
          (writes && Number(u.Id) !== c.user.id
            ? `<form method="post" action="${c.href('/users/delete')}" class="inline">${c.csrfField()}<input type="hidden" name="id" value="${Number(u.Id)}">` +
              `<button type="submit" class="danger" aria-label="${t.remove} ${escapeHtml(String(u.Username))}">${t.remove}</button></form>`
            : '') +
          `</td></tr>`,
      )
      .join('') +
    `</tbody></table>`;
  if (writes)
    body +=
      `<h2>${t.newUser}</h2><form method="post" action="${c.href('/users')}">${c.csrfField()}` +
      `<label for="username">${t.username}</label><input id="username" name="username" required maxlength="64" autocomplete="off">` +
      `<label for="fullName">${t.fullName}</label><input id="fullName" name="fullName" required maxlength="200">` +
      `<label for="email">${t.emailAddress}</label><input id="email" name="email" type="email" required maxlength="254">` +
      `<label for="password">${t.password}</label><input id="password" name="password" type="password" required maxlength="1024" autocomplete="new-password">` +
      checkboxes('roles', ROLES, ['READONLY'], t.roles) +
      `<p><button type="submit">${t.newUser}</button></p></form>`;
  return consolePage(reply, c, status, t.users, body);
}

async function applicationsScreen(c: Console, reply: FastifyReply, status = 200, top = ''): Promise<FastifyReply> {
  const t = c.t;
  const res = await c.api('GET', '/Applications');
  if (!res.ok) return consolePage(reply, c, res.status, t.applications, failure(res.message));
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const apps: any[] = res.body.Applications ?? [];
  const body =
    top +
    notice(c) +
    `<table><thead><tr><th scope="col">${t.appName}</th><th scope="col">${t.clientId}</th><th scope="col">${t.scopes}</th>` +
    `<th scope="col">${t.created}</th><th scope="col">${t.actions}</th></tr></thead><tbody>` +
    apps
      .map(
        (a) =>
          `<tr><td>${escapeHtml(String(a.Name))}</td><td><code>${escapeHtml(String(a.ClientId))}</code></td>` +
          `<td>${escapeHtml((a.Scopes as string[]).join(' '))}</td><td>${c.date(a.CreationDate)}</td><td>` +
          (a.Revoked === true
            ? t.revoked
            : `<form method="post" action="${c.href('/applications/revoke')}" class="inline">${c.csrfField()}<input type="hidden" name="id" value="${Number(a.Id)}">` +
              `<button type="submit" class="danger" aria-label="${t.revokeApp} ${escapeHtml(String(a.Name))}">${t.revokeApp}</button></form>`) +
          `</td></tr>`,
      )
      .join('') +
    `</tbody></table>` +
    `<h2>${t.newApplication}</h2><form method="post" action="${c.href('/applications')}">${c.csrfField()}` +
    `<label for="name">${t.appName}</label><input id="name" name="name" required maxlength="200">` +
    checkboxes('scopes', SCOPES, ['read'], t.scopes) +
    `<label for="redirects">${t.redirectUris}</label><textarea id="redirects" name="redirects" maxlength="6000"></textarea>` +
    `<p><button type="submit">${t.newApplication}</button></p></form>`;
  return consolePage(reply, c, status, t.applications, body, { scripts: ['console.js'] });
}

/** The secret of a new application or key: on this answer only (the page is never cached). */
const shownOnce = (c: Console, text: string, label: string, secret: string) =>
  `<div class="once" role="status"><p>${text}</p><p>${label}: <code id="secret">${escapeHtml(secret)}</code> ` +
  `<button type="button" class="secondary copy" data-copy="${escapeHtml(secret)}" data-copied="${c.t.copied}" aria-label="${c.t.copy}: ${label.replace(/<[^>]*>/g, '')}">${c.t.copy}</button></p></div>`;

async function keysScreen(
  c: Console,
  reply: FastifyReply,
  hashStore: Pick<HashStore, 'listKeys'>,
  status = 200,
  top = '',
): Promise<FastifyReply> {
  const t = c.t;
  if (!c.may('users', true)) return consolePage(reply, c, 403, t.keys, failure(t.notAllowed));
  const keys = await hashStore.listKeys((await c.principal()).customerId);
  const body =
    top +
    notice(c) +
    (keys.length === 0
      ? `<p>${t.none}</p>`
      : `<table><thead><tr><th scope="col">${t.label}</th><th scope="col">${t.created}</th><th scope="col">${t.actions}</th></tr></thead><tbody>` +
        keys
          .map(
            (k) =>
              `<tr><td>${escapeHtml(k.label)}</td><td>${c.date(new Date(k.createdAt * 1000).toISOString())}</td><td>` +
              (k.revokedAt !== null
                ? t.revoked
                : `<form method="post" action="${c.href('/keys/revoke')}" class="inline">${c.csrfField()}<input type="hidden" name="id" value="${Number(k.keyId)}">` +
                  `<button type="submit" class="danger" aria-label="${t.revokeApp} ${escapeHtml(k.label)}">${t.revokeApp}</button></form>`) +
              `</td></tr>`,
          )
          .join('') +
        `</tbody></table>`) +
    `<h2>${t.newKey}</h2><form method="post" action="${c.href('/keys')}">${c.csrfField()}` +
    `<label for="label">${t.label}</label><input id="label" name="label" required maxlength="100" value="kv">` +
    `<p><button type="submit">${t.newKey}</button></p></form>`;
  return consolePage(reply, c, status, t.keys, body, { scripts: ['console.js'] });
}

export function registerTeamScreens(
  routes: ReturnType<typeof consoleRoutes>,
  deps: { hashStore: Pick<HashStore, 'listKeys' | 'createKey' | 'revokeKey'> },
): void {
  routes.get('/users', (c, reply) => usersScreen(c, reply));
  routes.post('/users', async (c, reply) => {
    const res = await c.api('POST', '/User', {
      Username: field(c.request, 'username'),
      FullName: field(c.request, 'fullName'),
      Email: field(c.request, 'email'),
      Password: (c.request.body as { password?: unknown }).password,
      Roles: fields(c.request, 'roles'),
    });
    if (!res.ok) return usersScreen(c, reply, 400, failure(res.message));
    return redirectDone(reply, c, '/users', 'created');
  });
  routes.post('/users/delete', async (c, reply) => {
    const res = await c.api('DELETE', `/User/${encodeURIComponent(field(c.request, 'id'))}`);
    if (!res.ok) return usersScreen(c, reply, 400, failure(res.message));
    return redirectDone(reply, c, '/users', 'deleted');
  });

  routes.get('/applications', (c, reply) => applicationsScreen(c, reply));
  routes.post('/applications', async (c, reply) => {
    const redirects = field(c.request, 'redirects').split(/\s+/).filter(Boolean);
    const res = await c.api('POST', '/Application', {
      Name: field(c.request, 'name'),
      Scopes: fields(c.request, 'scopes'),
      RedirectUris: redirects,
    });
    if (!res.ok) return applicationsScreen(c, reply, 400, failure(res.message));
    return applicationsScreen(
      c,
      reply,
      201,
      shownOnce(
        c,
        c.t.secretOnce,
        `${c.t.clientId} <code>${escapeHtml(String(res.body.ClientId))}</code> · ${c.t.secret}`,
        String(res.body.ClientSecret),
      ),
    );
  });
  routes.post('/applications/revoke', async (c, reply) => {
    const res = await c.api('DELETE', `/Application/${encodeURIComponent(field(c.request, 'id'))}`);
    if (!res.ok) return applicationsScreen(c, reply, 400, failure(res.message));
    return redirectDone(reply, c, '/applications', 'deleted');
  });

  routes.get('/keys', (c, reply) => keysScreen(c, reply, deps.hashStore));
  routes.post('/keys', async (c, reply) => {
    if (!c.may('users', true)) return consolePage(reply, c, 403, c.t.keys, failure(c.t.notAllowed));
    const label = field(c.request, 'label');
    if (!/^[\x20-\x7e]{1,100}$/.test(label))
      return keysScreen(c, reply, deps.hashStore, 400, failure('The label is 1 to 100 printable characters.'));
    const created = await deps.hashStore.createKey((await c.principal()).customerId, label, c.actor);
    return keysScreen(c, reply, deps.hashStore, 201, shownOnce(c, c.t.keyOnce, 'x-api-key', created.key));
  });
  routes.post('/keys/revoke', async (c, reply) => {
    if (!c.may('users', true)) return consolePage(reply, c, 403, c.t.keys, failure(c.t.notAllowed));
    const id = field(c.request, 'id');
    if (!/^[0-9]{1,10}$/.test(id)) return keysScreen(c, reply, deps.hashStore, 400, failure('No such key.'));
    try {
      await deps.hashStore.revokeKey((await c.principal()).customerId, kvKeyId(Number(id)), c.actor);
    } catch (e) {
      if (!isRefusal(e)) throw e;
      return keysScreen(c, reply, deps.hashStore, 404, failure('No such key.'));
    }
    return redirectDone(reply, c, '/keys', 'deleted');
  });
}
