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

const quoted = JSON.stringify;

/**
 * The envelope as the bytes a webhook receives: JSON.stringify(envelope(event, streamId)), written around
 * the stored `data` as it is. The data is stored as JSON.stringify wrote it, so parsing it only to write
 * it again would give the same text, at a cost per delivery that grows with the user (a parse and a
 * stringify of the whole object, and its garbage).
 */
export function envelopeJson(eventId: string, event: Omit<EventRow, 'id'>, streamId: string): string {
  return (
    `{"id":${quoted(eventId)},"source":${quoted(event.source)},"specversion":"1.0","type":${quoted(event.type)},` +
    `"time":${quoted(event.time)},"data":${event.data},"a0tenant":${quoted(event.tenant_id)},` +
    `"a0stream":${quoted(streamId)}${event.purpose === 'test' ? ',"a0purpose":"test"' : ''}}`
  );
}
