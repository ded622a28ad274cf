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

/**
 * The instant of a date-time the schemas' `date-time` format accepted, in milliseconds. That format
 * (RFC 3339) allows a leap second, `23:59:60`, which Date cannot parse: it is taken as the instant the
 * leap second ends, the first of the next minute, as POSIX time counts it.
 */
export function dateTimeMs(value: string): number {
  const ms = Date.parse(value);
  if (!Number.isNaN(ms)) return ms;
  const leap = /^(.*\d\d:\d\d:)60((?:\.\d+)?.*)$/.exec(value);
  return leap ? Date.parse(`${leap[1]}59${leap[2]}`) + 1000 : Number.NaN;
}

/** Stored times carry milliseconds: `2025-01-01T00:00:00Z` compares as `2025-01-01T00:00:00.000Z`. */
const isoMs = (value: string): string => new Date(dateTimeMs(value)).toISOString();

/**
 * A list of event types without repeats: the types are a closed set of a few dozen, while a request
 * may repeat one tens of thousands of times, each a bound parameter of the query (past SQLite's and
 * PostgreSQL's limits on them).
 */
const distinct = (types: readonly string[]): string[] => [...new Set(types)];

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
  return { ...(eventTypes ? { eventTypes: distinct(eventTypes) } : {}), ...window(query.date_from, query.date_to) };
}

/** POST …/redeliver: undefined when its `statuses` leave out `failed`, so nothing can match. */
export function redeliveryFilter(body: RedeliverBody): FailedDeliveryFilter | undefined {
  if (body.statuses && !body.statuses.includes('failed')) return undefined;
  const eventTypes = body.event_types && body.event_types.length > 0 ? distinct(body.event_types) : undefined;
  return { ...(eventTypes ? { eventTypes } : {}), ...window(body.date_from, body.date_to) };
}
