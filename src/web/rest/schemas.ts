import { Type, type TSchema } from 'typebox';
import { BOOLISH_PATTERN } from '../compat.js';

/** The failure body of DESIGN §5.1, for every route's 4xx/5xx responses. */
export const Failure = Type.Object(
  {
    success: Type.Literal(false),
    Message: Type.String(),
    ErrorId: Type.Integer(),
    ErrorField: Type.Optional(Type.String()),
    Errors: Type.Optional(
      Type.Array(Type.Object({ ErrorId: Type.Integer(), ErrorField: Type.Optional(Type.String()), Message: Type.String() })),
    ),
  },
  { $id: 'Failure', description: 'Failure envelope (docs/errors.md)' },
);

/** Response map of an authenticated route: its 200 body plus the failure bodies. */
export function responses(ok: TSchema): Record<string, TSchema> {
  const ref = Type.Ref('Failure');
  return { 200: ok, 400: ref, 401: ref, 403: ref, 404: ref, 409: ref, 413: ref, 417: ref, 429: ref, 500: ref };
}

/** `{success: true, …members}` */
export function okBody<T extends Record<string, TSchema>>(members: T, description?: string) {
  return Type.Object({ success: Type.Literal(true), ...members }, description === undefined ? {} : { description });
}

/** A query boolean in any spelling real clients use: true/false, True/False, 1/0. */
export const Boolish = Type.String({ pattern: BOOLISH_PATTERN });

/** A body boolean: JSON true/false, or the same spellings as strings, or 1/0. */
export const BoolishBody = Type.Union([Type.Boolean(), Type.String({ pattern: BOOLISH_PATTERN }), Type.Integer({ minimum: 0, maximum: 1 })], {
  description: 'true/false, True/False or 1/0',
});

/** The security requirement shown in the OpenAPI document for bearer-token routes. */
export const bearer = [{ bearer: [] as string[] }];
