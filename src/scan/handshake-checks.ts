// Handshake behaviour beyond versions and suites: secure renegotiation (RFC 5746), TLS compression
// (CRIME) and the downgrade signal TLS_FALLBACK_SCSV (RFC 7507).
import { probe, type ProbeContext } from './probe.js';
import type { VersionProbe } from './protocols.js';
import { candidateSuites } from './suite-classes.js';
import { ALERT, hasRenegotiationInfo } from './tls-wire.js';
import type { HandshakeResult, TlsVersion } from './types.js';

/**
 * The three checks, from the version probes already made plus two more ClientHellos. A server that
 * speaks only TLS 1.3 has neither renegotiation nor compression: both are null (not applicable).
 */
export async function checkHandshake(
  ctx: ProbeContext,
  serverName: string | undefined,
  versions: readonly VersionProbe[],
): Promise<HandshakeResult> {
  const offered = versions.filter((v) => v.offered === true).map((v) => v.version);
  const legacy = [...offered].reverse().find((v) => v !== 'TLSv1.3');
  const legacyHello = versions.find((v) => v.version === legacy)?.flight?.hello;
  const secureRenegotiation = legacyHello === undefined ? null : hasRenegotiationInfo(legacyHello);
  const [compression, fallbackScsv] = await Promise.all([
    legacy === undefined ? null : compressionAccepted(ctx, serverName, legacy),
    offered.length < 2 ? null : fallbackRefused(ctx, serverName, offered[offered.length - 2]!),
  ]);
  return { secureRenegotiation, compression, fallbackScsv };
}

/** Offers DEFLATE (method 1) before null compression: a server that picks it is open to CRIME. */
async function compressionAccepted(
  ctx: ProbeContext,
  serverName: string | undefined,
  version: TlsVersion,
): Promise<boolean | null> {
  const out = await probe(ctx, { version, suites: candidateSuites(version), serverName, compression: true });
  if (out.kind !== 'flight' || out.flight.hello === undefined) return null;
  return out.flight.hello.compression === 1;
}

/** A ClientHello one version below the best, with the SCSV: the server must answer inappropriate_fallback. */
async function fallbackRefused(
  ctx: ProbeContext,
  serverName: string | undefined,
  version: TlsVersion,
): Promise<boolean | null> {
  const out = await probe(ctx, { version, suites: candidateSuites(version), serverName, fallbackScsv: true });
  if (out.kind !== 'flight') return null;
  if (out.flight.alert === ALERT.inappropriateFallback) return true;
  return out.flight.hello !== undefined ? false : null;
}
