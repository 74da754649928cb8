// The password rules of a customer's users (issue: sub-users). The least length is the
// customer's setting; the rest hold for everyone. The common passwords are zxcvbn's list
// (@zxcvbn-ts/language-common, about 30,000 of the most used), loaded on first use so that a
// start that checks no password does not pay for it.

/** Longer passwords are refused: argon2id hashes the whole input, and nobody types more. */
export const PASSWORD_MAX_LENGTH = 256;

let common: Promise<ReadonlySet<string>> | undefined;
function commonPasswords(): Promise<ReadonlySet<string>> {
  common ??= import('@zxcvbn-ts/language-common').then(
    ({ dictionary }) => new Set(dictionary['passwords-common'].map((p) => p.toLowerCase())),
  );
  return common;
}

/**
 * Why `password` may not be used by this user, naming the rule, or undefined when it may. The
 * rules: at least `minLength` characters (Unicode code points) and at most PASSWORD_MAX_LENGTH;
 * not containing the username or the local part of the e-mail address (either way of case, when
 * they have three characters or more); not one of the common passwords (either way of case).
 */
export async function passwordProblem(
  password: string,
  context: { readonly minLength: number; readonly username: string; readonly email: string },
): Promise<string | undefined> {
  const length = [...password].length;
  if (length < context.minLength) return `Password must have at least ${context.minLength} characters.`;
  if (length > PASSWORD_MAX_LENGTH) return `Password must have at most ${PASSWORD_MAX_LENGTH} characters.`;
  const lower = password.toLowerCase();
  const username = context.username.toLowerCase();
  if (username.length >= 3 && lower.includes(username)) return 'Password must not contain the username.';
  const local = context.email.split('@')[0]!.toLowerCase();
  if (local.length >= 3 && lower.includes(local))
    return "Password must not contain the e-mail address's local part (before the @).";
  if ((await commonPasswords()).has(lower)) return 'Password is one of the most common passwords: choose another.';
  return undefined;
}
