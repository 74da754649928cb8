import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { BOOLISH_PATTERN, CertdeskError, DatabaseUnavailable, errorRow, type ErrorKind } from '../core/index.js';
import { databaseUnavailable } from '../storage/index.js';

/** The failure body of DESIGN §5.1. */
export interface FailureBody {
  success: false;
  Message: string;
  ErrorId: number;
  ErrorField?: string;
  Errors?: { ErrorId: number; ErrorField?: string; Message: string }[];
}

/** Renders a CertdeskError as its HTTP status and failure body. */
export function failure(err: CertdeskError): { status: number; body: FailureBody } {
  const row = errorRow(err.kind);
  const body: FailureBody = {
    success: false,
    Message: err.hasMessage ? err.message : row.message,
    ErrorId: row.errorId,
  };
  if (err.field !== undefined) body.ErrorField = err.field;
  if (err.faults.length > 0) {
    body.Errors = err.faults.map((f) => {
      const r = errorRow(f.kind);
      return {
        ErrorId: r.errorId,
        ...(f.field === undefined ? {} : { ErrorField: f.field }),
        Message: f.message ?? r.message,
      };
    });
  }
  return { status: row.status, body };
}

const NUL_NOT_STORABLE = 'The request contains a NUL character (U+0000), which cannot be stored.';

/** Maps anything thrown while serving a request to a CertdeskError; unknown errors become `internal`. */
export function toCertdeskError(error: unknown): CertdeskError {
  if (error instanceof CertdeskError) return error;
  // The database out of reach (a restart, a failover) or busy: the caller may try again, so 503, not 500.
  const unavailable = databaseUnavailable(error);
  if (unavailable !== undefined) return new DatabaseUnavailable(unavailable, error);
  const e = error as Partial<FastifyError> & { validation?: SchemaError[] };
  if (Array.isArray(e.validation) && e.validation.length > 0) {
    // One fault per field: a union (anyOf) reports each branch it tried, which means nothing alone.
    const byField = new Map<string, SchemaError[]>();
    for (const v of e.validation) {
      const field = fieldOf(v.instancePath ?? '', v.params, e.validationContext);
      byField.set(field, [...(byField.get(field) ?? []), v]);
    }
    return CertdeskError.ofFaults(
      [...byField].map(([field, errors]) => ({
        kind: 'invalidInput' as ErrorKind,
        field,
        message: `${field} ${schemaProblem(errors)}.`,
      })),
    );
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new CertdeskError('payloadTooLarge');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_BAD_URL':
    case 'FST_ERR_ASYNC_CONSTRAINT':
      return new CertdeskError('malformedRequest', e.message);
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new CertdeskError('invalidInput', 'A path parameter is too long.');
    // PostgreSQL refusing a NUL in text (22021) or in jsonb (22P05): client text that got past
    // refuse-nul.ts (a NUL inside a decoded CSR, say). The client's fault, so not a 500.
    case '22021':
    case '22P05':
      return new CertdeskError('invalidInput', NUL_NOT_STORABLE, { cause: error });
    default:
  }
  if (error instanceof SyntaxError)
    return new CertdeskError('malformedRequest', `The request body is not valid JSON: ${error.message}`);
  if (e.statusCode === 429) return new CertdeskError('rateLimited');
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500)
    return new CertdeskError('malformedRequest', e.message);
  return new CertdeskError('internal', undefined, { cause: error });
}

/** One failed schema keyword, as Ajv reports it. */
interface SchemaError {
  readonly instancePath?: string;
  readonly keyword?: string;
  readonly params?: Record<string, unknown>;
  readonly message?: string;
}

const article = (type: string) => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`);

/**
 * What is wrong with one field, in words a client's developer reads once: the most specific
 * failure of the field's schema (required, a bound, a form), else the types a union accepts,
 * else its allowed values.
 */
function schemaProblem(errors: readonly SchemaError[]): string {
  const of = (keyword: string) => errors.filter((v) => v.keyword === keyword);
  if (errors.some((v) => typeof v.params?.missingProperty === 'string')) return 'is required';
  if (of('pattern').some((v) => v.params?.pattern === BOOLISH_PATTERN))
    return 'must be true or false (also True/False or 1/0)';
  for (const v of errors) {
    const limit = v.params?.limit;
    switch (v.keyword) {
      case 'maximum':
        return `must be at most ${String(limit)}`;
      case 'minimum':
        return `must be at least ${String(limit)}`;
      case 'maxLength':
        return `must be at most ${String(limit)} characters long`;
      case 'minLength':
        return Number(limit) === 1 ? 'must not be empty' : `must be at least ${String(limit)} characters long`;
      case 'maxItems':
        return `must have at most ${String(limit)} items`;
      case 'minItems':
        return `must have at least ${String(limit)} items`;
      case 'pattern':
      case 'format':
        return 'does not have the expected form';
      case 'additionalProperties':
        return 'is not allowed here';
      default:
    }
  }
  const types = [...new Set(of('type').flatMap((v) => String(v.params?.type ?? '').split(',')))].filter(Boolean);
  if (types.length > 0) return `must be ${types.map(article).join(' or ')}`;
  const allowed = [
    ...new Set([
      ...of('const').map((v) => v.params?.allowedValue),
      ...of('enum').flatMap((v) => (v.params?.allowedValues as unknown[] | undefined) ?? []),
    ]),
  ];
  if (allowed.length > 0) return `must be one of ${allowed.map((a) => String(a)).join(', ')}`;
  return 'is invalid';
}

function fieldOf(path: string, params: Record<string, unknown> | undefined, context: string | undefined): string {
  const missing = params?.missingProperty ?? params?.additionalProperty;
  const parts = path.split('/').filter(Boolean);
  if (typeof missing === 'string') parts.push(missing);
  if (parts.length > 0) return parts.join('.');
  return context === 'body' ? 'body' : (context ?? 'request');
}

/** Fastify error handler: every failure leaves as the §5.1 envelope, 5xx with a generic message. */
export function handleError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const err = toCertdeskError(error);
  const { status, body } = failure(err);
  if (status >= 500) logFailure(request, err, error, 'request');
  else request.log.info({ kind: err.kind, field: err.field }, 'request refused');
  const retry = retryAfter(err, error);
  if (retry !== undefined) void reply.header('retry-after', retry);
  return reply.code(status).send(body);
}

/**
 * Logs a failure of the service (a 5xx) under `subject`: the database out of reach as a warning,
 * an outage to watch, not a fault of ours to fix; anything else as an error.
 */
export function logFailure(request: FastifyRequest, err: CertdeskError, error: unknown, subject: string): void {
  if (err instanceof DatabaseUnavailable) request.log.warn({ err: error }, `${subject} failed: database unavailable`);
  else request.log.error({ err: error }, `${subject} failed`);
}

/** How long a refused caller should wait, in seconds, when sending the same request again later will do. */
const NOT_READY_RETRY_SECONDS = 5;

/**
 * Retry-After for a failure worth sending again unchanged: a rate limit's own wait; the database
 * unavailable, a few seconds. Not after a lost COMMIT (the change may have been made: look first),
 * nor for a service not set up (a CA hierarchy not initialized waits for its operator).
 */
export function retryAfter(err: CertdeskError, error: unknown): string | undefined {
  if (err.kind === 'rateLimited') {
    const retry = (error as { retryAfter?: unknown }).retryAfter;
    return retry === undefined ? undefined : String(retry);
  }
  return err instanceof DatabaseUnavailable ? String(NOT_READY_RETRY_SECONDS) : undefined;
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { status, body } = failure(
    new CertdeskError('notFound', `No such path: ${request.method} ${request.url.split('?')[0]}`),
  );
  return reply.code(status).send(body);
}
