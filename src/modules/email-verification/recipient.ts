import { emailVerificationErrors } from '../../http/errors.ts';
import type { User } from '../users/user.ts';

/** The user as a verification email's template sees it, and as the email is addressed. */
export type Recipient = Pick<User, 'user_id'> & { email: string } & Record<string, unknown>;

/** The user's email address: without one there is nothing to verify, a 400. */
export function requireEmail(user: Record<string, unknown>): string {
  if (typeof user.email !== 'string') throw emailVerificationErrors.noEmailAddress();
  return user.email;
}
