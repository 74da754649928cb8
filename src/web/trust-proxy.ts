/** CERTDESK_TRUST_PROXY as configured: false, a hop count, or the proxies' addresses/CIDRs. */
export type TrustProxy = false | number | string[];

/**
 * Fastify's `trustProxy` for a configured value. A hop count becomes the function Fastify itself
 * builds for numbers (its types omit them): trust the `n` nearest hops, never the client's own.
 */
export function fastifyTrustProxy(value: TrustProxy): false | string[] | ((address: string, hop: number) => boolean) {
  if (typeof value !== 'number') return value;
  return (_address, hop) => hop < value;
}
