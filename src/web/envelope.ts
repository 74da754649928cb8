import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { CertdeskError, errorRow, type ErrorKind } from '../core/index.js';

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
  const body: FailureBody = { success: false, Message: err.hasMessage ? err.message : row.message, ErrorId: row.errorId };
  if (err.field !== undefined) body.ErrorField = err.field;
  if (err.faults.length > 0) {
    body.Errors = err.faults.map((f) => {
      const r = errorRow(f.kind);
      return { ErrorId: r.errorId, ...(f.field === undefined ? {} : { ErrorField: f.field }), Message: f.message ?? r.message };
    });
  }
  return { status: row.status, body };
}

/** Maps anything thrown while serving a request to a CertdeskError; unknown errors become `internal`. */
export function toCertdeskError(error: unknown): CertdeskError {
  if (error instanceof CertdeskError) return error;
  const e = error as Partial<FastifyError> & { validation?: { instancePath?: string; params?: Record<string, unknown>; message?: string }[] };
  if (Array.isArray(e.validation) && e.validation.length > 0) {
    const faults = e.validation.map((v) => {
      const field = fieldOf(v.instancePath ?? '', v.params, e.validationContext);
      const missing = typeof v.params?.missingProperty === 'string';
      const message = missing ? `${field} is required` : `${field} ${v.message ?? 'is invalid'}`;
      return { kind: 'invalidInput' as ErrorKind, field, message };
    });
    return CertdeskError.ofFaults(faults);
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
    default:
  }
  if (error instanceof SyntaxError) return new CertdeskError('malformedRequest', `The request body is not valid JSON: ${error.message}`);
  if (e.statusCode === 429) return new CertdeskError('rateLimited');
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) return new CertdeskError('malformedRequest', e.message);
  return new CertdeskError('internal', undefined, { cause: error });
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
  if (status >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ kind: err.kind, field: err.field }, 'request refused');
  if (err.kind === 'rateLimited') {
    const retry = (error as { retryAfter?: unknown }).retryAfter;
    if (retry !== undefined) void reply.header('retry-after', String(retry));
  }
  return reply.code(status).send(body);
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { status, body } = failure(new CertdeskError('notFound', `No such path: ${request.method} ${request.url.split('?')[0]}`));
  return reply.code(status).send(body);
}
