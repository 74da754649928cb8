// Messages between the benchmark runner (parent) and a server child, over Node's IPC channel.
// The parent stops a child with SIGTERM (or the child stops when the IPC channel closes).

/** What a server child serves: the bare Fastify baseline or the real certdesk app. */
export type ServerKind = 'baseline' | 'certdesk';

export type ChildMessage =
  | { type: 'ready'; port: number; credentials?: { clientId: string; clientSecret: string }; ocspPath?: string }
  | { type: 'usage'; id: number; cpuMicros: number; eluActive: number; eluIdle: number }
  | { type: 'ack'; id: number }
  | { type: 'error'; id?: number; message: string };

export type ParentMessage =
  | { type: 'usage'; id: number }
  | { type: 'profile-start'; id: number }
  | { type: 'profile-stop'; id: number; file: string };
