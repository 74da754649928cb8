// modules/nginx/certdesk-hash.conf (+ certdesk-hash.js, njs) in a real nginx from Debian.
import { describeWebModule } from '../support/web-module-contract.js';
import { startNginx, webServerBinary } from '../support/web-servers.js';

const nginx = webServerBinary('nginx');

describeWebModule({
  name: 'nginx',
  servesHead: true,
  guardsWellKnown: true,
  start: nginx === undefined ? undefined : (sites) => startNginx(nginx, sites),
});
