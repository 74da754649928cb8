import type { App } from '../types.js';
import { escapeHtml, langOf, page, type Lang } from './page.js';

// GET /redeem: the voucher redeemer's page (spec §1: a third party redeems without an account).
// The page is a shell; /ui/redeem.js drives it through the anonymous REST endpoints
// (GET /Voucher/*/{code}, POST /Redeem, GET /Order/*/{code}).

const TEXT = {
  en: {
    title: 'Redeem a voucher',
    lang: 'Deutsch',
    other: 'de',
    code: 'Voucher code',
    look: 'Show what it pays for',
    paysFor: 'The voucher pays for',
    product: 'Product',
    validity: 'Validity',
    sans: 'Extra names',
    servers: 'Servers',
    names: 'Names for the certificate (the first is the common name), separated by spaces',
    csr: 'Certificate request (PEM)',
    makeCsr: 'Make a key and request in this browser',
    keyLink: 'Download the private key (it is not sent anywhere)',
    method: 'How you show control of the names',
    dns: 'DNS record',
    file: 'File on the web server',
    email: 'E-mail to the domain owner',
    contact: 'Contact',
    firstName: 'First name',
    lastName: 'Last name',
    email2: 'E-mail',
    phone: 'Phone',
    redeem: 'Redeem',
    done: 'Your order',
    order: 'Order',
    status: 'Status',
    dcv: 'Publish this, then check',
    check: 'Check now',
    cert: 'Certificate',
    chain: 'Intermediate certificates',
    p7: 'PKCS#7 bundle',
    namesFirst: 'Enter the names first.',
    keyMade: 'A key and a request were made in this browser. Download the key now: it is not kept.',
    issued: 'The certificate is issued.',
    record: 'Record',
    at: 'Name',
    value: 'Value',
    contents: 'Contents',
  },
  de: {
    title: 'Gutschein einlösen',
    lang: 'English',
    other: 'en',
    code: 'Gutscheincode',
    look: 'Anzeigen, was er bezahlt',
    paysFor: 'Der Gutschein bezahlt',
    product: 'Produkt',
    validity: 'Laufzeit',
    sans: 'Weitere Namen',
    servers: 'Server',
    names: 'Namen für das Zertifikat (der erste ist der Common Name), durch Leerzeichen getrennt',
    csr: 'Zertifikatsanforderung (PEM)',
    makeCsr: 'Schlüssel und Anforderung in diesem Browser erzeugen',
    keyLink: 'Privaten Schlüssel herunterladen (er wird nirgends hingeschickt)',
    method: 'Wie Sie die Kontrolle über die Namen zeigen',
    dns: 'DNS-Eintrag',
    file: 'Datei auf dem Webserver',
    email: 'E-Mail an den Domaininhaber',
    contact: 'Kontakt',
    firstName: 'Vorname',
    lastName: 'Nachname',
    email2: 'E-Mail',
    phone: 'Telefon',
    redeem: 'Einlösen',
    done: 'Ihre Bestellung',
    order: 'Bestellung',
    status: 'Status',
    dcv: 'Veröffentlichen Sie dies und prüfen Sie dann',
    check: 'Jetzt prüfen',
    cert: 'Zertifikat',
    chain: 'Zwischenzertifikate',
    p7: 'PKCS#7-Bündel',
    namesFirst: 'Geben Sie zuerst die Namen ein.',
    keyMade:
      'Schlüssel und Anforderung wurden in diesem Browser erzeugt. Laden Sie den Schlüssel jetzt herunter: er wird nicht aufbewahrt.',
    issued: 'Das Zertifikat ist ausgestellt.',
    record: 'Eintrag',
    at: 'Name',
    value: 'Wert',
    contents: 'Inhalt',
  },
} as const satisfies Record<Lang, Record<string, string>>;

/** The texts the script shows, handed over as data attributes (no inline script under the CSP). */
const SCRIPT_TEXTS = [
  'product',
  'validity',
  'sans',
  'servers',
  'namesFirst',
  'keyMade',
  'issued',
  'record',
  'at',
  'value',
  'file',
  'contents',
] as const;

export function registerRedeemPage(app: App): void {
  app.get('/redeem', async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    const field = (id: string, label: string, attrs = '') =>
      `<label for="${id}">${escapeHtml(label)}</label><input id="${id}" ${attrs}>`;
    const data = SCRIPT_TEXTS.map(
      (k) => `data-${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}="${escapeHtml(t[k])}"`,
    ).join(' ');
    const body =
      `<nav class="lang"><a href="/redeem?lang=${t.other}" lang="${t.other}">${t.lang}</a></nav>` +
      `<div id="texts" hidden ${data}></div>` +
      `<p id="status" role="status" aria-live="polite"></p>` +
      `<form id="code-form">${field('code', t.code, 'name="code" autocomplete="off" required spellcheck="false"')}` +
      `<button type="submit">${escapeHtml(t.look)}</button></form>` +
      `<section id="step-order" hidden><h2>${escapeHtml(t.paysFor)}</h2><dl id="terms"></dl>` +
      `<form id="order-form">` +
      field('names', t.names, 'required spellcheck="false"') +
      `<label for="csr">${escapeHtml(t.csr)}</label><textarea id="csr" required spellcheck="false"></textarea>` +
      `<button type="button" class="secondary" id="make-csr">${escapeHtml(t.makeCsr)}</button> ` +
      `<a id="key-link" hidden>${escapeHtml(t.keyLink)}</a>` +
      `<label for="method">${escapeHtml(t.method)}</label><select id="method">` +
      `<option value="DNS">${escapeHtml(t.dns)}</option><option value="FILE">${escapeHtml(t.file)}</option>` +
      `<option value="EMAIL">${escapeHtml(t.email)}</option></select>` +
      `<h2>${escapeHtml(t.contact)}</h2>` +
      field('first-name', t.firstName, 'required autocomplete="given-name"') +
      field('last-name', t.lastName, 'required autocomplete="family-name"') +
      field('email', t.email2, 'type="email" required autocomplete="email"') +
      field('phone', t.phone, 'type="tel" required autocomplete="tel"') +
      `<button type="submit">${escapeHtml(t.redeem)}</button></form></section>` +
      `<section id="step-done" hidden><h2>${escapeHtml(t.done)}</h2>` +
      `<dl><dt>${escapeHtml(t.order)}</dt><dd id="order-id"></dd><dt>${escapeHtml(t.status)}</dt><dd id="order-status"></dd></dl>` +
      `<div class="box" id="dcv-box"><h2>${escapeHtml(t.dcv)}</h2><dl id="dcv"></dl>` +
      `<button type="button" id="check">${escapeHtml(t.check)}</button></div>` +
      `<p><a id="cert-link" hidden>${escapeHtml(t.cert)}</a></p><p><a id="chain-link" hidden>${escapeHtml(t.chain)}</a></p>` +
      `<p><a id="p7-link" hidden>${escapeHtml(t.p7)}</a></p></section>`;
    return page(reply, 200, t.title, body, { lang, scripts: ['redeem.js'] });
  });
}
