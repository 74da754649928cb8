// Which protocol versions a server speaks and which suites it accepts at each, found the usual
// way: offer a list, read the ServerHello's choice, take it out, repeat until the server refuses.
import { probe, type ProbeContext, type ProbeOutcome } from './probe.js';
import { acceptedSuite, candidateSuites } from './suite-classes.js';
import { VERSION_CODE, type ServerFlight, type ServerHello } from './tls-wire.js';
import { TLS_VERSIONS, type AcceptedSuite, type ProtocolResult, type TlsVersion } from './types.js';

/** The first probe of one version: whether the server took it, and its flight (certificate, extensions). */
export interface VersionProbe {
  readonly version: TlsVersion;
  /** true: the server answered at this version; false: it refused; null: no answer (timeout, unreachable). */
  readonly offered: boolean | null;
  readonly flight?: ServerFlight;
  readonly outcome: ProbeOutcome['kind'];
}

/** Probes every version at once, each with every suite it can carry and status_request. Never throws. */
export async function probeVersions(ctx: ProbeContext, serverName: string | undefined): Promise<VersionProbe[]> {
  return Promise.all(
    TLS_VERSIONS.map(async (version): Promise<VersionProbe> => {
      const out = await probe(ctx, { version, suites: candidateSuites(version), serverName, statusRequest: true });
      if (out.kind === 'flight') {
        const hello = out.flight.hello;
        return {
          version,
          offered: hello !== undefined && hello.version === VERSION_CODE[version],
          flight: out.flight,
          outcome: out.kind,
        };
      }
      // A server may simply hang up on a version it refuses (or on any ClientHello, if it is no TLS server at all).
      return { version, offered: out.kind === 'closed' || out.kind === 'not-tls' ? false : null, outcome: out.kind };
    }),
  );
}

/**
 * Every suite the server accepts at `version`, in its order of preference when it has one, and
 * whether it has one (two opposite client orders give the same first choice). Starts from the
 * first probe's choice. A probe that times out midway ends the list early: `complete` false.
 */
export async function enumerateSuites(
  ctx: ProbeContext,
  version: TlsVersion,
  serverName: string | undefined,
  first: ServerHello,
): Promise<ProtocolResult & { readonly complete: boolean }> {
  const accepted: number[] = [first.cipher];
  let remaining = candidateSuites(version).filter((c) => c !== first.cipher);
  let complete = true;
  while (remaining.length > 0) {
    const out = await probe(ctx, { version, suites: remaining, serverName });
    const chosen = chosenSuite(out, version);
    if (chosen === 'refused') break;
    if (chosen === 'no-answer' || !remaining.includes(chosen)) {
      complete = chosen !== 'no-answer';
      break;
    }
    accepted.push(chosen);
    remaining = remaining.filter((c) => c !== chosen);
  }
  let serverPreference: boolean | null = null;
  if (accepted.length > 1) {
    const out = await probe(ctx, { version, suites: [...accepted].reverse(), serverName });
    const chosen = chosenSuite(out, version);
    serverPreference = typeof chosen === 'number' ? chosen === accepted[0] : null;
  }
  const suites: AcceptedSuite[] = accepted.map(acceptedSuite);
  return { version, offered: true, suites, serverPreference, complete };
}

function chosenSuite(out: ProbeOutcome, version: TlsVersion): number | 'refused' | 'no-answer' {
  if (out.kind === 'timeout' || out.kind === 'unreachable') return 'no-answer';
  if (out.kind !== 'flight') return 'refused';
  const hello = out.flight.hello;
  if (hello === undefined || hello.version !== VERSION_CODE[version]) return 'refused';
  return hello.cipher;
}
