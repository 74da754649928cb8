// certdesk hash store for nginx (njs 0.7+): the content handler of location @certdesk_hash in
// certdesk-hash.conf (spec 4.35, docs/web-server-modules.md). It asks the store for the hash filed
// for the request's host name and serves it only from a well-formed answer. Anything else (store
// down, slow, not HTTP, another status or type, too long, no hash line) is a plain 404.
/* global ngx */

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
/** Two or more LDH labels, a TLD that is not all digits (so no IPv4 literal), at most 253 characters. */
const DNS_NAME = new RegExp('^(?=.{1,253}$)(?:' + LABEL + '\\.)+(?=[a-z0-9-]*[a-z])' + LABEL + '$');
const TEXT_PLAIN = /^text\/plain\s*(?:;|$)/i;
/** Largest store answer accepted; a hash is at most 512 printable ASCII characters. */
const MAX_BYTES = 4096;
const MAX_HASH = 512;
const HASH_LINE = /^[\x20-\x7e]*[\x21-\x7e][\x20-\x7e]*$/;

/** The store's name for a Host header (lower-cased, port and one trailing dot dropped), or undefined. */
function hostName(header) {
  if (typeof header !== 'string') return undefined;
  const match = /^([a-z0-9.-]+?)\.?(?::[0-9]{1,5})?$/.exec(header.trim().toLowerCase());
  return match !== null && DNS_NAME.test(match[1]) ? match[1] : undefined;
}

/** The last line of a 2xx text/plain answer of at most 4 KiB, when it is a printable hash. */
function hashOf(status, contentType, body) {
  if (status < 200 || status > 299 || !TEXT_PLAIN.test(contentType || '') || body.length > MAX_BYTES) return undefined;
  const lines = body.replace(/\r?\n$/, '').split('\n');
  const last = lines[lines.length - 1].replace(/\r$/, '');
  return last.length <= MAX_HASH && HASH_LINE.test(last) ? last : undefined;
}

/** GET <store>/<host> with the key: the hash in a well-formed answer, else undefined. */
async function lookup(r, host) {
  const url = r.variables.certdesk_kv_url.replace(/\/+$/, '') + '/' + host;
  const headers = { 'x-api-key': r.variables.certdesk_kv_key, Accept: 'text/plain' };
  const res = await ngx.fetch(url, { headers: headers, max_response_body_size: MAX_BYTES });
  // Awaited on a line of its own: njs 0.7 crashes the worker on an await inside call arguments.
  const body = await res.text();
  return hashOf(res.status, res.headers.get('Content-Type'), body);
}

/** A store that refuses, times out (js_fetch_timeout), is not HTTP or answers too much: no hash. */
function noHash() {
  return undefined;
}

async function serve(r) {
  const host = hostName(r.headersIn.Host);
  let hash;
  if ((r.method === 'GET' || r.method === 'HEAD') && host !== undefined) hash = await lookup(r, host).catch(noHash);
  r.headersOut['Content-Type'] = 'text/plain; charset=utf-8';
  r.headersOut['Cache-Control'] = 'no-store';
  r.headersOut['X-Content-Type-Options'] = 'nosniff';
  if (hash === undefined) r.return(404, 'Not Found\n');
  else r.return(200, hash + '\n');
}

export default { serve };
