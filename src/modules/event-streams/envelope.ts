import type { EventRow } from './store/deliveries.ts';

/** A delivered event: CloudEvents 1.0, structured JSON (compat notes §4.9), in the original's key order. */
export interface Envelope {
  id: string;
  source: string;
  specversion: '1.0';
  type: string;
  time: string;
  data: unknown;
  a0tenant: string;
  a0stream: string;
  a0purpose?: 'test';
}

export const sourceFor = (tenantDomain: string): string => `urn:svc:${tenantDomain}`;

/** The same event renders the same envelope on every attempt: only its stream differs between streams. */
export function envelope(event: EventRow, streamId: string): Envelope {
  return {
    id: event.id,
    source: event.source,
    specversion: '1.0',
    type: event.type,
    time: event.time,
    data: JSON.parse(event.data) as unknown,
    a0tenant: event.tenant_id,
    a0stream: streamId,
    ...(event.purpose === 'test' ? { a0purpose: 'test' as const } : {}),
  };
}
