import type { DeliveriesQuery, RedeliverBody } from './schema.ts';

/**
 * Which of a stream's failed deliveries a request is about: only failed deliveries are logged (the
 * original's "delivery failure" list) and only they can be redelivered.
 */
export interface FailedDeliveryFilter {
  eventTypes?: string[];
  /** Events at or after this time (ISO, milliseconds). */
  timeFrom?: string;
  /** Events before this time (ISO, milliseconds). */
  timeTo?: string;
}

/** Stored times carry milliseconds: `2025-01-01T00:00:00Z` compares as `2025-01-01T00:00:00.000Z`. */
const isoMs = (value: string): string => new Date(value).toISOString();

/** A comma-separated query value; blanks dropped, and undefined when nothing is left. */
export function commaList(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const values = raw
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  return values.length === 0 ? undefined : values;
}

function window(from: string | undefined, to: string | undefined): Pick<FailedDeliveryFilter, 'timeFrom' | 'timeTo'> {
  return {
    ...(from === undefined ? {} : { timeFrom: isoMs(from) }),
    ...(to === undefined ? {} : { timeTo: isoMs(to) }),
  };
}

/** GET …/deliveries: undefined when its `statuses` leave out `failed`, so nothing can match. */
export function listingFilter(
  query: Pick<DeliveriesQuery, 'statuses' | 'event_types' | 'date_from' | 'date_to'>,
): FailedDeliveryFilter | undefined {
  const statuses = commaList(query.statuses);
  if (statuses && !statuses.includes('failed')) return undefined;
  const eventTypes = commaList(query.event_types);
  return { ...(eventTypes ? { eventTypes } : {}), ...window(query.date_from, query.date_to) };
}

/** POST …/redeliver: undefined when its `statuses` leave out `failed`, so nothing can match. */
export function redeliveryFilter(body: RedeliverBody): FailedDeliveryFilter | undefined {
  if (body.statuses && !body.statuses.includes('failed')) return undefined;
  const eventTypes = body.event_types && body.event_types.length > 0 ? [...body.event_types] : undefined;
  return { ...(eventTypes ? { eventTypes } : {}), ...window(body.date_from, body.date_to) };
}
