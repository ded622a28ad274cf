import { randomBytes } from 'node:crypto';
import { hashSecret } from '../../../secret-hash.ts';
import { DEFAULT_LINK_LIFETIME_SECONDS } from '../../email-templates/schema.ts';
import type { TicketRecord } from './store.ts';

/** Where a verification link points, on whichever of the tenant's domains it was built for. */
export const VERIFICATION_PATH = '/u/email-verification';

export interface TicketInput {
  tenantId: string;
  userId: string;
  email: string;
  domain: string;
  resultUrl: string | undefined;
  /** 0 or absent: five days, as the original. */
  ttlSeconds: number | undefined;
  includeEmailInRedirect: boolean;
}

/** A new ticket: its link, and the record that makes the link work once stored. */
export interface NewTicket {
  url: string;
  record: TicketRecord;
}

/**
 * A ticket for `input`, issued at `at`. The link carries 256 random bits (`secret`); only their SHA-256
 * is stored, so the database never holds a usable link.
 */
export function newTicket(
  input: TicketInput,
  at: string,
  secret: string = randomBytes(32).toString('base64url'),
): NewTicket {
  const lifetime = input.ttlSeconds || DEFAULT_LINK_LIFETIME_SECONDS;
  return {
    url: `https://${input.domain}${VERIFICATION_PATH}?ticket=${secret}`,
    record: {
      ticket_hash: hashSecret(secret),
      tenant_id: input.tenantId,
      user_id: input.userId,
      email: input.email,
      result_url: input.resultUrl ?? null,
      include_email_in_redirect: input.includeEmailInRedirect ? 1 : 0,
      expires_at: new Date(Date.parse(at) + lifetime * 1000).toISOString(),
      used_at: null,
      created_at: at,
    },
  };
}

/** What following a link finds, before the user's email is checked: a ticket to verify, or why not. */
export type TicketState = 'invalid' | 'used' | 'expired' | 'usable';

/** A ticket verifies once, before it expires; an unknown ticket is invalid. */
export function ticketState(record: Pick<TicketRecord, 'used_at' | 'expires_at'> | undefined, at: string): TicketState {
  if (!record) return 'invalid';
  if (record.used_at !== null) return 'used';
  if (record.expires_at <= at) return 'expired';
  return 'usable';
}
