// A key and a PKCS#10 certificate request made in the browser with WebCrypto (ECDSA P-256,
// SHA-256): the private key never leaves the page; it is offered for download only.

const enc = new TextEncoder();

function length(n) {
  if (n < 128) return [n];
  const bytes = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 255);
  return [0x80 | bytes.length, ...bytes];
}
function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
const tlv = (tag, body) => concat(new Uint8Array([tag, ...length(body.length)]), body);
const seq = (...parts) => tlv(0x30, concat(...parts));
const set = (...parts) => tlv(0x31, concat(...parts));
function oid(text) {
  const [a, b, ...rest] = text.split('.').map(Number);
  const out = [40 * a + b];
  for (const part of rest) {
    const bytes = [part & 127];
    for (let v = part >> 7; v > 0; v >>= 7) bytes.unshift((v & 127) | 128);
    out.push(...bytes);
  }
  return tlv(0x06, new Uint8Array(out));
}
function integer(bytes) {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const trimmed = bytes.slice(i);
  return tlv(0x02, trimmed[0] & 0x80 ? concat(new Uint8Array([0]), trimmed) : trimmed);
}
const pem = (label, der) =>
  `-----BEGIN ${label}-----\n${btoa(String.fromCharCode(...der))
    .match(/.{1,64}/g)
    .join('\n')}\n-----END ${label}-----\n`;

/** Makes a P-256 key and a CSR for `names` (the first is the common name). Returns both as PEM. */
export async function makeKeyAndCsr(names) {
  const keys = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const spki = new Uint8Array(await crypto.subtle.exportKey('spki', keys.publicKey));
  const subject = seq(set(seq(oid('2.5.4.3'), tlv(0x0c, enc.encode(names[0])))));
  const san = seq(...names.map((n) => tlv(0x82, enc.encode(n))));
  const extensionRequest = seq(oid('1.2.840.113549.1.9.14'), set(seq(seq(oid('2.5.29.17'), tlv(0x04, san)))));
  const info = seq(integer(new Uint8Array([0])), subject, spki, tlv(0xa0, extensionRequest));
  const raw = new Uint8Array(await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, keys.privateKey, info));
  const signature = seq(integer(raw.slice(0, 32)), integer(raw.slice(32)));
  const csr = seq(info, seq(oid('1.2.840.10045.4.3.2')), tlv(0x03, concat(new Uint8Array([0]), signature)));
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey('pkcs8', keys.privateKey));
  return { csrPem: pem('CERTIFICATE REQUEST', csr), keyPem: pem('PRIVATE KEY', pkcs8) };
}

/** Offers `content` as a file to save through `link` (a data: URL: the CSP allows no blob: fetches). */
export function offerDownload(link, name, content) {
  link.href = `data:application/x-pem-file;base64,${btoa(content)}`;
  link.download = name;
  link.hidden = false;
}
