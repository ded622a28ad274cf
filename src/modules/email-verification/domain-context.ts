import { Type, type Static } from '@sinclair/typebox';
import { emailVerificationErrors } from '../../http/errors.ts';
import type { CustomDomainService, EmailDomain } from '../custom-domains/service.ts';
import { HOSTNAME_PATTERN } from '../custom-domains/schema.ts';
import type { Tenant } from '../tenants/service.ts';

/** The domain whose context applies to an email: links are built on it, templates see it as `custom_domain`. */
export interface DomainContext {
  domain: string;
  domain_metadata: Record<string, string>;
}

// A canonical domain may carry a port (`localhost:8080`); custom domains never do.
const DomainHeader = (description: string) =>
  Type.String({
    minLength: 3,
    maxLength: 255,
    pattern: HOSTNAME_PATTERN.replace(/\$$/, '(:[0-9]{1,5})?$'),
    description,
  });

/** Headers of the operations that send emails or build links; `auth0-custom-domain` is the original's name. */
export const CustomDomainHeaders = Type.Object({
  'svc-custom-domain': Type.Optional(
    DomainHeader(
      'Custom domain whose context applies to the emails and links of this request; default: the default domain',
    ),
  ),
  'auth0-custom-domain': Type.Optional(DomainHeader("The original's name of svc-custom-domain")),
});
export type CustomDomainHeaders = Static<typeof CustomDomainHeaders>;

const contextOf = (record: EmailDomain): DomainContext => ({
  domain: record.domain,
  domain_metadata: record.domain_metadata,
});

/** The domain the headers ask for, lower-cased; undefined without them. Both names given must agree. */
export function requestedDomain(headers: CustomDomainHeaders): string | undefined {
  const ours = headers['svc-custom-domain']?.toLowerCase();
  const original = headers['auth0-custom-domain']?.toLowerCase();
  if (ours !== undefined && original !== undefined && ours !== original)
    throw emailVerificationErrors.conflictingDomainHeaders();
  return ours ?? original;
}

/**
 * The domain context among the tenant's custom domains (spec 4.6 rule 4):
 * - with a requested domain: the ready custom domain it names; anything else is a 400;
 * - without it: the default domain — a ready custom domain, or the canonical domain when that is the
 *   default. A default that is no longer ready cannot be used: then the only ready custom domain
 *   serves, several are a 409 (the caller must choose with the header), none leaves the canonical.
 */
export function chooseDomainContext(
  canonical: DomainContext,
  requested: string | undefined,
  records: readonly EmailDomain[],
): DomainContext {
  const ready = records.filter((record) => record.status === 'ready');
  if (requested !== undefined) {
    const chosen = ready.find((record) => record.domain === requested);
    if (!chosen) throw emailVerificationErrors.unknownCustomDomain();
    return contextOf(chosen);
  }
  const chosenDefault = records.find((record) => record.is_default);
  if (!chosenDefault) return canonical;
  if (chosenDefault.status === 'ready') return contextOf(chosenDefault);
  if (ready.length > 1) throw emailVerificationErrors.ambiguousCustomDomain();
  return ready[0] ? contextOf(ready[0]) : canonical;
}

/**
 * The request's domain context: the tenant's canonical domain when the header names it (no custom
 * domain is read then), otherwise as chooseDomainContext decides among the tenant's custom domains.
 */
export async function resolveDomainContext(
  customDomains: Pick<CustomDomainService, 'emailDomains'>,
  tenant: Tenant,
  headers: CustomDomainHeaders,
): Promise<DomainContext> {
  const requested = requestedDomain(headers);
  const canonical: DomainContext = { domain: tenant.domain, domain_metadata: {} };
  if (requested === tenant.domain) return canonical;
  return chooseDomainContext(canonical, requested, await customDomains.emailDomains(tenant.id));
}
