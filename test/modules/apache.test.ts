// modules/apache/certdesk-hash.conf, certdesk-hash-vhost.conf (+ certdesk-hash.lua, mod_lua) in a
// real Apache httpd from Debian.
import { describeWebModule } from '../support/web-module-contract.js';
import { startApache, webServerBinary } from '../support/web-servers.js';

const apache = webServerBinary('apache2');

describeWebModule({
  name: 'Apache httpd',
  // mod_proxy would send HEAD on to the store, whose HEAD answer has no body to check: GET only.
  servesHead: false,
  guardsWellKnown: true,
  start: apache === undefined ? undefined : (sites) => startApache(apache, sites),
});
