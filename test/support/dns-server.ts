// A real authoritative DNS server on loopback (UDP and TCP, one port) for DCV, CAA and approver
// tests: the code under test talks to it through node:dns exactly as it would to a resolver.
import { createSocket } from 'node:dgram';
import type { Server, Socket } from 'node:net';
import { Packet, createServer, type DnsServer, type Resource } from 'dns2';

export type TestRecord =
  | { type: 'TXT'; data: string }
  | { type: 'CNAME'; target: string }
  | { type: 'CAA'; flags: number; tag: string; value: string }
  | { type: 'A'; address: string }
  | { type: 'AAAA'; address: string };

/** Zone data: name (lower-case, no trailing dot) → its records. */
export interface DnsRecords {
  readonly [name: string]: readonly TestRecord[];
}

export interface TestDnsServer {
  /** `host:port` as CERTDESK_DNS_SERVERS wants it, e.g. `127.0.0.1:53535`. */
  readonly address: string;
  /** Replaces the records of a name (an empty list removes the name). */
  set(name: string, records: readonly TestRecord[]): void;
  /** Removes the records of one name, or of every name. */
  clear(name?: string): void;
  /** Answers questions of `type` about `name` with SERVFAIL (a broken zone), or stops (`on` false). */
  servfail(name: string, type: TestRecord['type'], on?: boolean): void;
  /** How many questions the server has answered (over UDP and TCP) since it started. */
  readonly answered: () => number;
  close(): Promise<void>;
}

const HOST = '127.0.0.1';
// A TTL of 0 keeps any resolver-side cache from serving a record a test has since replaced.
const TTL = 0;
const MAX_CHAIN = 8;
const BIND_ATTEMPTS = 20;

/** Starts a server with the given zone data on an ephemeral loopback port (UDP and TCP). */
export async function startDnsServer(initial: DnsRecords = {}): Promise<TestDnsServer> {
  const zone = new Map<string, readonly TestRecord[]>();
  for (const [name, records] of Object.entries(initial)) setRecords(zone, name, records);

  let answered = 0;
  const failing = new Set<string>();
  const handle = (request: Packet, send: (response: Packet | Buffer) => Promise<Buffer>): void => {
    answered++;
    const q = request.questions[0];
    const broken = q !== undefined && failing.has(`${normalize(q.name)} ${q.type}`);
    void send(broken ? servfail(request) : answer(zone, request)).catch(() => undefined);
  };

  let lastError: unknown;
  for (let attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
    const port = await freeUdpPort();
    const server = createServer({ udp: true, tcp: true, handle });
    try {
      await listen(server, port);
    } catch (err) {
      // The UDP port was free but TCP was not (or someone took it meanwhile): try another.
      lastError = err;
      closeQuietly(server);
      if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') continue;
      throw err;
    }
    return running(server, zone, port, () => answered, failing);
  }
  throw new Error(`no free port for the test DNS server: ${String(lastError)}`);
}

function running(
  server: DnsServer,
  zone: Map<string, readonly TestRecord[]>,
  port: number,
  answered: () => number,
  failing: Set<string>,
): TestDnsServer {
  // Errors after start (a client resetting a TCP connection) must not crash the test run.
  server.on('error', () => undefined);
  server.on('requestError', () => undefined);
  // Open TCP connections would hold close() for dns2's 10 s idle timeout: track and drop them.
  const sockets = new Set<Socket>();
  const tcp = (server as unknown as { servers: { tcp: Server } }).servers.tcp;
  tcp.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  let closing: Promise<void> | undefined;
  return {
    address: `${HOST}:${port}`,
    answered,
    set(name, records) {
      setRecords(zone, name, records);
    },
    clear(name) {
      if (name === undefined) zone.clear();
      else zone.delete(normalize(name));
    },
    servfail(name, type, on = true) {
      const key = `${normalize(name)} ${Packet.TYPE[type]}`;
      if (on) failing.add(key);
      else failing.delete(key);
    },
    close() {
      closing ??= (async () => {
        const closed = server.close();
        for (const socket of sockets) socket.destroy();
        await closed;
      })();
      return closing;
    },
  };
}

function setRecords(zone: Map<string, readonly TestRecord[]>, name: string, records: readonly TestRecord[]): void {
  const key = normalize(name);
  if (records.length === 0) zone.delete(key);
  else zone.set(key, [...records]);
}

/**
 * The authoritative answer: the records of the queried name and type; a CNAME at the name (for
 * any other type) is answered and followed inside the zone, as an authoritative server chains
 * in-zone aliases. NXDOMAIN when the final name has neither records nor names below it.
 */
function answer(zone: ReadonlyMap<string, readonly TestRecord[]>, request: Packet): Packet {
  const response = Packet.createResponseFromRequest(request);
  response.header.aa = 1;
  response.header.ra = 1;
  const question = request.questions[0];
  if (question === undefined) {
    response.header.rcode = 1; // FORMERR
    return response;
  }
  let owner = question.name;
  let current = normalize(question.name);
  const seen = new Set<string>();
  for (let step = 0; step < MAX_CHAIN; step++) {
    seen.add(current);
    const records = zone.get(current) ?? [];
    const alias = records.find((r): r is Extract<TestRecord, { type: 'CNAME' }> => r.type === 'CNAME');
    if (alias !== undefined && question.type !== Packet.TYPE.CNAME) {
      response.answers.push(resource(owner, alias));
      owner = normalize(alias.target);
      current = owner;
      if (seen.has(current)) break; // a loop: answer what we have
      continue;
    }
    for (const record of records) {
      if (typeCode(record) === question.type) response.answers.push(resource(owner, record));
    }
    break;
  }
  if (!exists(zone, current)) response.header.rcode = 3; // NXDOMAIN
  return response;
}

function servfail(request: Packet): Packet {
  const response = Packet.createResponseFromRequest(request);
  response.header.rcode = 2; // SERVFAIL
  return response;
}

function exists(zone: ReadonlyMap<string, readonly TestRecord[]>, name: string): boolean {
  if (zone.has(name)) return true;
  const suffix = `.${name}`;
  for (const key of zone.keys()) if (key.endsWith(suffix)) return true;
  return false;
}

function typeCode(record: TestRecord): number {
  return Packet.TYPE[record.type];
}

function resource(name: string, record: TestRecord): Resource {
  const base = { name, type: typeCode(record), class: Packet.CLASS.IN, ttl: TTL };
  switch (record.type) {
    case 'TXT':
      // dns2 writes each string as given: a string over 255 bytes would corrupt the RDATA.
      return new Packet.Resource({ ...base, data: splitTxt(record.data) as unknown as string[] });
    case 'CNAME':
      return new Packet.Resource({ ...base, domain: normalize(record.target) });
    case 'CAA':
      return new Packet.Resource({ ...base, flags: record.flags, tag: record.tag, value: record.value });
    case 'A':
    case 'AAAA':
      return new Packet.Resource({ ...base, address: record.address });
  }
}

/** RFC 1035 §3.3.14: TXT RDATA is a sequence of <character-string>s of at most 255 bytes. */
export function splitTxt(text: string): Buffer[] {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length === 0) return [bytes];
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) parts.push(bytes.subarray(i, i + 255));
  return parts;
}

function normalize(name: string): string {
  const n = name.trim().toLowerCase();
  return n.endsWith('.') ? n.slice(0, -1) : n;
}

/** A UDP port that is free right now (the TCP side is checked by binding it). */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    socket.once('error', reject);
    socket.bind(0, HOST, () => {
      const { port } = socket.address();
      socket.close(() => resolve(port));
    });
  });
}

function listen(server: DnsServer, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen({ udp: { port, address: HOST }, tcp: { port, address: HOST } }).then(() => {
      server.off('error', onError);
      resolve();
    }, reject);
  });
}

function closeQuietly(server: DnsServer): void {
  server.on('error', () => undefined);
  const { udp, tcp } = (server as unknown as { servers: { udp?: { close(): void }; tcp?: { close(): void } } }).servers;
  for (const s of [udp, tcp]) {
    try {
      s?.close();
    } catch {
      // not bound: nothing to close
    }
  }
}
