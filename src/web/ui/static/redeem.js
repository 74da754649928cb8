// The voucher redemption page (no account): the code → what it pays for → a CSR (pasted, or made
// in this browser) and the validation method → POST /rest/v1/Redeem → the order, followed until
// its certificate can be downloaded. Everything goes through the anonymous REST endpoints; the
// code is kept in this page's memory only.
import { makeKeyAndCsr, offerDownload as download } from './csr.js';

const $ = (id) => document.getElementById(id);
const text = (id) => $('texts').dataset[id] ?? id;
let code = '';

function show(id, on = true) {
  $(id).hidden = !on;
}
function say(message, ok = false) {
  const status = $('status');
  status.textContent = message;
  status.className = ok ? 'ok' : 'error';
}
async function api(method, path, body) {
  const res = await fetch(`/rest/v1${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = await res.json().catch(() => ({ success: false, Message: res.statusText }));
  if (!res.ok || json.success !== true) throw new Error(json.Message ?? `HTTP ${res.status}`);
  return json;
}
function definitions(target, entries) {
  target.replaceChildren();
  for (const [term, value] of entries) {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    const c = document.createElement('code');
    c.textContent = String(value);
    dd.append(c);
    target.append(dt, dd);
  }
}

$('code-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  say('');
  try {
    const wanted = $('code').value.trim();
    const { Vouchers } = await api('GET', `/Voucher/*/${encodeURIComponent(wanted)}`);
    const p = Vouchers[0].OrderParameters;
    code = wanted;
    definitions($('terms'), [
      [text('product'), p.ProductCode],
      [text('validity'), p.ValidityPeriod],
      [text('sans'), p.SubjectAltNameCount],
      [text('servers'), p.ServerCount],
    ]);
    $('order-form').dataset.product = p.ProductCode;
    $('order-form').dataset.validity = String(p.ValidityPeriod);
    show('step-order');
    $('names').focus();
  } catch (e) {
    say(e.message);
  }
});

$('make-csr').addEventListener('click', async () => {
  say('');
  const names = $('names')
    .value.split(/[\s,]+/)
    .filter(Boolean);
  if (names.length === 0) return say(text('namesFirst'));
  const { csrPem, keyPem } = await makeKeyAndCsr(names);
  $('csr').value = csrPem;
  download($('key-link'), 'private-key.pem', keyPem);
  say(text('keyMade'), true);
});

$('order-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  say('');
  const form = $('order-form');
  const names = $('names')
    .value.split(/[\s,]+/)
    .filter(Boolean);
  const contact = {
    FirstName: $('first-name').value,
    LastName: $('last-name').value,
    Email: $('email').value,
    Phone: $('phone').value,
  };
  try {
    const placed = await api('POST', '/Redeem', {
      VoucherCode: code,
      OrderParameters: {
        ProductCode: form.dataset.product,
        ValidityPeriod: Number(form.dataset.validity),
        CSR: $('csr').value,
        SubjectAltNames: names.slice(1),
        DVAuthMethod: $('method').value,
      },
      AdminContact: contact,
      TechContact: contact,
    });
    show('code-form', false);
    show('step-order', false);
    show('step-done');
    $('order-id').textContent = String(placed.ServiceOrderID);
    const dns = placed.OrderParameters.DNSAuthDetails;
    const file = placed.OrderParameters.FileAuthDetails;
    if (dns !== undefined)
      definitions($('dcv'), [
        [text('record'), dns.PointerType],
        [text('at'), dns.DNSEntry],
        [text('value'), dns.DNSValue],
      ]);
    if (file !== undefined)
      definitions($('dcv'), [
        [text('file'), `${file.FilePath}${file.FileName}`],
        [text('contents'), file.FileContents],
      ]);
    await follow(placed.Fulfillment);
  } catch (e) {
    say(e.message);
  }
});

async function follow(fulfillment) {
  let f = fulfillment;
  if (f === undefined) {
    const { OrderInfo } = await api('GET', `/Order/*/${encodeURIComponent(code)}`);
    $('order-status').textContent = `${OrderInfo.OrderStatus.MajorStatus} / ${OrderInfo.OrderStatus.MinorStatus}`;
    f = OrderInfo.Fulfillment;
  }
  if (f === undefined) return;
  $('order-status').textContent = 'COMPLETE';
  show('dcv-box', false);
  download($('cert-link'), 'certificate.pem', f.Certificate);
  download($('chain-link'), 'chain.pem', f.Intermediate);
  download($('p7-link'), 'certificate.p7b', f.Certificate_PKCS7);
  say(text('issued'), true);
}

$('check').addEventListener('click', () => follow().catch((e) => say(e.message)));

// A redemption link carries the code after `#` (never sent to a server): fill it in.
const linked = new URLSearchParams(location.hash.slice(1)).get('code');
if (linked !== null && linked !== '') $('code').value = linked;
