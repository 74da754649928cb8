// scanHost: one host's TLS configuration, certificate and HTTP front door, rated. Network in,
// result out; it never writes. Our own ClientHellos (probe.ts) find versions and suites, since
// node's OpenSSL cannot speak SSLv3, RC4 or export suites; node:tls only reads a TLS 1.3-only
// server's encrypted certificate.
import { isIP } from 'node:net';
import { Limiter, isPublicAddress } from '../core/index.js';
import { checkCertificate, type CertificateInput } from './certificate.js';
import { findingsOf, type ScanFacts } from './findings.js';
import { checkHandshake } from './handshake-checks.js';
import { checkHttp, fetchCaCertificate } from './http-check.js';
import { type ProbeContext } from './probe.js';
import { enumerateSuites, probeVersions, type VersionProbe } from './protocols.js';
import { rate } from './rating.js';
import { tls13Certificate } from './tls13-certificate.js';
import type { CertificateResult, HostReport, ProtocolResult, ScanOptions, ScanTarget } from './types.js';

const DEFAULT_TIMEOUT_MS = 5000;
/** Connections open at once to one host: enough for the five version probes in parallel, few enough to be polite. */
const MAX_CONNECTIONS = 5;

/**
 * Scans `target.name` on `options.port` (TLS) and `options.httpPort` (the redirect check).
 * Returns `could-not-scan` with the reason when the name has no address, its addresses are all
 * refused (loopback, private, reserved, unless `allowPrivate`), nothing answers TLS, or the whole
 * scan outlasts `timeoutMs`; otherwise `scanned`. Never throws for what the host does.
 */
export async function scanHost(target: ScanTarget, options: ScanOptions): Promise<HostReport> {
  const startedAt = options.now();
  const started = performance.now();
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const controller = new AbortController();
  let address: string | null = null;
  const failed = (problem: string): HostReport => ({
    status: 'could-not-scan',
    name: target.name,
    address,
    port: options.port,
    startedAt,
    durationMs: Math.round(performance.now() - started),
    problem,
  });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<HostReport>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve(failed(`no result within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  const work = (async (): Promise<HostReport> => {
    // Step 1: resolve and vet the address, as the DCV FILE check does.
    const vetted = await vettedAddress(target.name, options);
    if ('problem' in vetted) return failed(vetted.problem);
    address = vetted.address;
    const scan = await scanAddress(target, options, vetted.address, timeoutMs, controller.signal);
    if ('problem' in scan) return failed(scan.problem);
    return {
      status: 'scanned',
      name: target.name,
      address: vetted.address,
      port: options.port,
      startedAt,
      durationMs: Math.round(performance.now() - started),
      ...scan,
    };
  })().catch((err: unknown) => failed(`scan failed: ${err instanceof Error ? err.message : String(err)}`));
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}

async function vettedAddress(
  name: string,
  o: Pick<ScanOptions, 'lookup' | 'allowPrivate'>,
): Promise<{ address: string } | { problem: string }> {
  let addresses: readonly string[];
  try {
    addresses = isIP(name) !== 0 ? [name] : await o.lookup(name);
  } catch (err) {
    return { problem: `${name} could not be resolved: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (addresses.length === 0) return { problem: `${name} has no address` };
  const allowed = addresses.find((a) => isIP(a) !== 0 && (o.allowPrivate || isPublicAddress(a)));
  if (allowed === undefined)
    return { problem: `refused: ${name} resolves only to non-public addresses (${addresses.join(', ')})` };
  return { address: allowed };
}

type Scanned = Omit<
  Extract<HostReport, { status: 'scanned' }>,
  'status' | 'name' | 'address' | 'port' | 'startedAt' | 'durationMs'
>;

async function scanAddress(
  target: ScanTarget,
  options: ScanOptions,
  address: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Scanned | { problem: string }> {
  const serverName = isIP(target.name) === 0 ? target.name : undefined;
  // A probe gets at most half the scan's time: a silent server is given up on well before the deadline.
  const probeTimeoutMs = Math.min(2500, Math.max(200, Math.floor(timeoutMs / 2)));
  const ctx: ProbeContext = {
    address,
    port: options.port,
    probeTimeoutMs,
    signal,
    limit: new Limiter(MAX_CONNECTIONS),
  };
  // Step 2: the HTTP checks run beside the TLS probes (they use their own connections).
  const httpResult = checkHttp({
    name: target.name,
    address,
    httpPort: options.httpPort,
    httpsPort: options.port,
    timeoutMs: probeTimeoutMs,
    signal,
  });
  // Step 3: one probe per version says which are offered and brings the certificate.
  const versions = await probeVersions(ctx, serverName);
  const unreachable = versions.find((v) => v.outcome === 'unreachable');
  if (versions.every((v) => v.offered !== true)) {
    await httpResult;
    if (unreachable !== undefined) return { problem: `cannot connect to ${address}:${options.port}` };
    if (versions.every((v) => v.outcome === 'timeout'))
      return { problem: `${address}:${options.port} accepted the connection but never answered a ClientHello` };
    return { problem: `${address}:${options.port} does not speak SSL 3.0 to TLS 1.3` };
  }
  // Step 4: suites per offered version, the handshake checks and the certificate, in parallel.
  const [protocols, handshake, certificate, http] = await Promise.all([
    Promise.all(versions.map((v) => protocolResult(ctx, serverName, v))),
    checkHandshake(ctx, serverName, versions),
    certificateResult(target, options, address, versions, probeTimeoutMs, signal),
    httpResult,
  ]);
  // Step 5: findings and the rating, from the facts alone.
  const facts: ScanFacts = { protocols, certificate, handshake, http, now: options.now() };
  const findings = findingsOf(facts);
  return { protocols, certificate, http, handshake, findings, rating: rate(facts, findings) };
}

async function protocolResult(
  ctx: ProbeContext,
  serverName: string | undefined,
  v: VersionProbe,
): Promise<ProtocolResult> {
  const hello = v.flight?.hello;
  if (v.offered !== true || hello === undefined)
    return { version: v.version, offered: v.offered, suites: [], serverPreference: null };
  const { complete: _complete, ...result } = await enumerateSuites(ctx, v.version, serverName, hello);
  return result;
}

async function certificateResult(
  target: ScanTarget,
  options: ScanOptions,
  address: string,
  versions: readonly VersionProbe[],
  timeoutMs: number,
  signal: AbortSignal,
): Promise<CertificateResult | null> {
  // The Certificate message of the best TLS ≤ 1.2 handshake is plaintext: the chain exactly as sent.
  const legacy = [...versions].reverse().find((v) => v.offered === true && v.version !== 'TLSv1.3');
  let input: CertificateInput | undefined;
  if (legacy?.flight?.certificates !== undefined && legacy.flight.certificates.length > 0) {
    input = {
      chain: legacy.flight.certificates,
      ocspStapled: legacy.flight.ocspResponse !== undefined,
      orderAsSent: true,
    };
  } else {
    const got = await tls13Certificate({ address, port: options.port, name: target.name, timeoutMs, signal });
    if (got !== undefined) input = { ...got, orderAsSent: false };
  }
  if (input === undefined) return null;
  const resolveHost = async (host: string): Promise<string | undefined> => {
    const vetted = await vettedAddress(host, options);
    return 'address' in vetted ? vetted.address : undefined;
  };
  try {
    return await checkCertificate(input, {
      name: target.name,
      now: options.now(),
      trustedRoots: options.trustedRoots ?? [],
      ...(target.orderCertificatePem === undefined ? {} : { orderCertificatePem: target.orderCertificatePem }),
      fetchIssuer: (url) => fetchCaCertificate(url, resolveHost, timeoutMs, signal),
    });
  } catch {
    return null;
  }
}
