// Real nginx and Apache httpd from Debian, run unprivileged on loopback ports from a config
// written to a temp dir, with the shipped modules/ configs included as they are (placeholders
// filled in). The module tests use them as a real site owner would.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** One site: a listener with its document root and the store it asks, with one customer's key. */
export interface SiteSpec {
  readonly port: number;
  readonly root: string;
  readonly storeUrl: string;
  readonly key: string;
}

export interface RunningServer {
  /** The server's error log so far (for failure messages). */
  log(): string;
  stop(): Promise<void>;
}

export const MODULES_DIR = resolve(import.meta.dirname, '../../modules');
const NJS_MODULE = '/usr/lib/nginx/modules/ngx_http_js_module.so';
const APACHE_MODULES = '/usr/lib/apache2/modules';

/**
 * The binary (and module files) a web server test needs, or why it cannot run. Missing parts fail
 * the run in CI (`CI` set: .ci/run installs them); elsewhere the caller skips with the reason printed.
 */
export function webServerBinary(name: 'nginx' | 'apache2'): string | undefined {
  const binary = ['/usr/sbin', '/usr/bin', '/sbin'].map((d) => join(d, name)).find((p) => existsSync(p));
  const needs = name === 'nginx' ? [NJS_MODULE] : [`${APACHE_MODULES}/mod_lua.so`, `${APACHE_MODULES}/mod_proxy.so`];
  const missing = binary === undefined ? [name] : needs.filter((f) => !existsSync(f));
  if (missing.length === 0) return binary;
  const pkgs = name === 'nginx' ? 'nginx libnginx-mod-http-js' : 'apache2';
  const reason = `${name} module tests not run: ${missing.join(', ')} not found (apt-get install ${pkgs})`;
  if (process.env.CI) throw new Error(reason);
  console.warn(reason);
  return undefined;
}

/** A shipped template with its `@NAME@` placeholders filled in; throws if one is left. */
export function renderTemplate(path: string, values: Record<string, string>): string {
  let text = readFileSync(path, 'utf8');
  for (const [name, value] of Object.entries(values)) text = text.replaceAll(`@${name}@`, value);
  const left = /@[A-Z_]+@/.exec(text);
  if (left !== null) throw new Error(`${path}: placeholder ${left[0]} not filled in`);
  return text;
}

/** A temp dir every worker user can read (Apache's children run as nobody when we are root). */
export function readableTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

/** nginx with one server { } per site, each including modules/nginx/certdesk-hash.conf. */
export async function startNginx(binary: string, sites: readonly SiteSpec[]): Promise<RunningServer> {
  const dir = readableTempDir('certdesk-nginx-');
  copyFileSync(join(MODULES_DIR, 'nginx/certdesk-hash.js'), join(dir, 'certdesk-hash.js'));
  const servers = sites.map((site, i) => {
    const snippet = renderTemplate(join(MODULES_DIR, 'nginx/certdesk-hash.conf'), {
      CERTDESK_DIR: dir,
      CERTDESK_KV_URL: site.storeUrl,
      CERTDESK_KV_KEY: site.key,
    });
    writeFileSync(join(dir, `site-${i}.conf`), snippet);
    return `
  server {
    listen 127.0.0.1:${site.port};
    root ${site.root};
    include ${dir}/site-${i}.conf;
    # The site's own rules, as a front-controller application has them: a server-level rewrite
    # of every missing file to /index.php, and a regex location for scripts and pages.
    if (!-e $request_filename) { rewrite ^ /index.php last; }
    location / { try_files $uri /index.php; }
    location ~ \\.(?:php|txt|html)$ { default_type text/plain; return 200 "front controller\\n"; }
  }`;
  });
  mkdirSync(join(dir, 'temp'));
  writeFileSync(
    join(dir, 'nginx.conf'),
    `load_module ${NJS_MODULE};
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log notice;
events { worker_connections 128; }
http {
  access_log off;
  client_body_temp_path ${dir}/temp/body;
  proxy_temp_path ${dir}/temp/proxy;
  fastcgi_temp_path ${dir}/temp/fastcgi;
  uwsgi_temp_path ${dir}/temp/uwsgi;
  scgi_temp_path ${dir}/temp/scgi;
  types { text/plain txt; text/html html; }
${servers.join('\n')}
}
`,
  );
  const child = spawn(binary, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'pipe' });
  return running(
    child,
    sites.map((s) => s.port),
    join(dir, 'error.log'),
  );
}

/** Apache httpd with one <VirtualHost> per site, each including modules/apache/certdesk-hash-vhost.conf. */
export async function startApache(binary: string, sites: readonly SiteSpec[]): Promise<RunningServer> {
  const dir = readableTempDir('certdesk-apache-');
  copyFileSync(join(MODULES_DIR, 'apache/certdesk-hash.lua'), join(dir, 'certdesk-hash.lua'));
  writeFileSync(
    join(dir, 'certdesk-hash.conf'),
    renderTemplate(join(MODULES_DIR, 'apache/certdesk-hash.conf'), { CERTDESK_DIR: dir }),
  );
  const hosts = sites.map((site, i) => {
    const snippet = renderTemplate(join(MODULES_DIR, 'apache/certdesk-hash-vhost.conf'), {
      CERTDESK_KV_URL: site.storeUrl,
      CERTDESK_KV_KEY: site.key,
    });
    writeFileSync(join(dir, `site-${i}.conf`), snippet);
    // The site's own rules, as a front-controller application has them: a server-level rule that
    // sends every .txt to it, and .htaccess sending every missing file to it.
    writeFileSync(
      join(site.root, '.htaccess'),
      'RewriteEngine On\nRewriteCond %{REQUEST_FILENAME} !-f\nRewriteRule . /index.html [L]\n',
    );
    return `Listen 127.0.0.1:${site.port}
<VirtualHost 127.0.0.1:${site.port}>
  DocumentRoot ${site.root}
  Include ${dir}/site-${i}.conf
  RewriteRule \\.txt$ /index.html [L]
  <Directory ${site.root}>
    AllowOverride All
    Require all granted
  </Directory>
</VirtualHost>`;
  });
  const modules = ['mpm_event', 'authz_core', 'mime', 'rewrite', 'proxy', 'proxy_http', 'headers', 'lua'];
  // Debian's httpd refuses to run its children as root: as root, they run as nobody.
  const user = process.getuid?.() === 0 ? 'User nobody\nGroup nogroup\n' : '';
  writeFileSync(
    join(dir, 'httpd.conf'),
    `ServerRoot ${dir}
ServerName localhost
PidFile ${dir}/httpd.pid
Mutex file:${dir}
DefaultRuntimeDir ${dir}
ErrorLog ${dir}/error.log
LogLevel warn
${user}${modules.map((m) => `LoadModule ${m}_module ${APACHE_MODULES}/mod_${m}.so`).join('\n')}
TypesConfig /dev/null
AddType text/plain .txt
AddType text/html .html
<Directory />
  AllowOverride None
  Require all denied
</Directory>
Include ${dir}/certdesk-hash.conf
${hosts.join('\n')}
`,
  );
  const child = spawn(binary, ['-f', join(dir, 'httpd.conf'), '-DFOREGROUND'], { stdio: 'pipe' });
  return running(
    child,
    sites.map((s) => s.port),
    join(dir, 'error.log'),
  );
}

/** Waits until every port accepts connections; fails with the server's output (and its error log) if it exits. */
export async function running(child: ChildProcess, ports: readonly number[], errorLog: string): Promise<RunningServer> {
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const kill = () => child.kill('SIGTERM');
  process.once('exit', kill);
  const log = () => `${output}${existsSync(errorLog) ? readFileSync(errorLog, 'utf8') : ''}`;
  const server: RunningServer = {
    log,
    async stop() {
      process.off('exit', kill);
      if (child.exitCode !== null || child.signalCode !== null) return;
      kill();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + 15_000;
  for (const port of ports) {
    while (!(await accepts(port))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await server.stop();
        throw new Error(`the web server did not start on port ${port}:\n${log()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return server;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
