// The console's few behaviours: copy buttons, and a key and request made in this browser (the
// private key never leaves it; it is offered for download only). Everything else is plain forms.
import { makeKeyAndCsr, offerDownload } from './csr.js';

for (const button of document.querySelectorAll('button.copy')) {
  button.addEventListener('click', async () => {
    await navigator.clipboard.writeText(button.dataset.copy ?? '');
    const label = button.textContent;
    button.textContent = button.dataset.copied ?? label;
    setTimeout(() => (button.textContent = label), 1500);
  });
}

const make = document.getElementById('make-csr');
if (make !== null) {
  make.addEventListener('click', async () => {
    const names = document
      .getElementById('names')
      .value.split(/[\s,]+/)
      .filter(Boolean);
    if (names.length === 0) {
      document.getElementById('names').focus();
      return;
    }
    const { csrPem, keyPem } = await makeKeyAndCsr(names);
    document.getElementById('csr').value = csrPem;
    offerDownload(document.getElementById('key-link'), 'private-key.pem', keyPem);
    document.getElementById('csr-note').textContent = make.dataset.keyMade ?? '';
  });
}
