import { Type, type TSchema } from 'typebox';
import { BOOLISH_PATTERN } from '../../core/index.js';

/** The members every failure body of DESIGN §5.1 has. */
export const failureMembers = {
  success: Type.Literal(false),
  Message: Type.String(),
  ErrorId: Type.Integer(),
  ErrorField: Type.Optional(Type.String()),
  Errors: Type.Optional(
    Type.Array(
      Type.Object({ ErrorId: Type.Integer(), ErrorField: Type.Optional(Type.String()), Message: Type.String() }),
    ),
  ),
};

/** The failure body of DESIGN §5.1, for every route's 4xx/5xx responses. */
export const Failure = Type.Object(failureMembers, {
  $id: 'Failure',
  description: 'Failure envelope (docs/errors.md)',
});

/** How to show control of a name by DNS (spec 2.6): the record to publish. */
export const DNSAuthDetails = Type.Object({
  PointerType: Type.String(),
  DNSEntry: Type.String(),
  DNSValue: Type.String(),
  Example: Type.String(),
  FQDNs: Type.Array(Type.String()),
});

/** How to show control of a name by FILE (spec 2.6): the file to serve. */
export const FileAuthDetails = Type.Object({
  FileName: Type.String(),
  FilePath: Type.String(),
  FileContents: Type.String(),
  FQDNs: Type.Array(Type.String()),
});

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
export const BoolishBody = Type.Union(
  [Type.Boolean(), Type.String({ pattern: BOOLISH_PATTERN }), Type.Integer({ minimum: 0, maximum: 1 })],
  {
    description: 'true/false, True/False or 1/0',
  },
);

/** The security requirement shown in the OpenAPI document for bearer-token routes. */
export const bearer = [{ bearer: [] as string[] }];
