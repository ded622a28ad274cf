import { badRequest } from '../../http/errors.ts';
import { dateTimeMs } from './delivery-filters.ts';
import type { StatsQuery, StatsScaleFactor, StreamStats } from './schema.ts';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/** The original's window when none is asked for: the last 14 days. Minute buckets: the last 3 hours. */
const DEFAULT_WINDOW_MS = 14 * DAY_MS;
const DEFAULT_MINUTE_WINDOW_MS = 3 * HOUR_MS;
/** The original gave an hour-long window hours and a two-week one days; where it switches is not known. */
const HOURS_UP_TO_MS = DAY_MS;
/**
 * The longest windows: a bounded answer (745 hours, 32 days, or 1,441 minutes) and a bounded read, the
 * stream's per-minute counts of the window's buckets (store/deliveries.ts, countsPerBucket), 46,080 rows
 * at most (32 day buckets of 1,440 minutes).
 */
const MAX_WINDOW_DAYS = 31;
const MAX_MINUTE_WINDOW_HOURS = 24;

/** A stats request's window: its bounds, its buckets, and the keys of the minute counts it reads. */
export interface StatsWindow {
  /** The window as answered: its bounds cut to the hour (the minute with minute buckets). */
  dateFrom: string;
  dateTo: string;
  scaleFactor: StatsScaleFactor;
  /** Every bucket's start, oldest first. */
  buckets: string[];
  /** The counts read: minutes from `firstMinute` up to `endMinute` (excluded), `YYYY-MM-DDTHH:MM`. */
  firstMinute: string;
  endMinute: string;
  /** How much of a minute's key names its bucket: 16 characters for a minute, 13 an hour, 10 a day. */
  bucketKeyLength: 10 | 13 | 16;
}

/**
 * The times an answer can state in RFC 3339 (`YYYY`): buckets from year 0 to before the last hour of 9999
 * (the end of the last bucket is the bound of the counts read, `YYYY-MM-DDTHH:MM`, which year 10000 is not).
 */
const FIRST_MS = Date.parse('0000-01-01T00:00:00.000Z');
const END_MS = Date.UTC(10000, 0, 1);

/** The minute of a time (ISO), `YYYY-MM-DDTHH:MM`: the key of its count in delivery_counts (migration 021). */
export const minuteOf = (at: string): string => at.slice(0, 16);

const floorTo = (ms: number, unit: number): number => Math.floor(ms / unit) * unit;
const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The window of GET …/event-streams/{id}/stats, as the original answers it: both bounds cut to their
 * hour, buckets from the one holding date_from to the one holding date_to, each counted whole (an hour's
 * window asked for 06:38–06:58 answers 06:00–06:00, one bucket with the hour's attempts). Without
 * date_to the window ends at the end of the current hour; without date_from it begins 14 days before.
 * The bucket is an hour for windows of up to 24 hours, a day beyond, or a minute when asked for.
 */
export function statsWindow(query: StatsQuery, nowMs: number): StatsWindow {
  const minutes = query.scale_factor === 60;
  const unit = minutes ? MINUTE_MS : HOUR_MS;
  const asked = { date_from: query.date_from, date_to: query.date_to };
  const ms: { date_from?: number; date_to?: number } = {};
  for (const name of ['date_from', 'date_to'] as const) {
    const value = asked[name];
    if (value === undefined) continue;
    ms[name] = dateTimeMs(value);
    // The schema's date-time format also passes offsets without a colon (`+01`), which are no RFC 3339 time.
    if (Number.isNaN(ms[name]))
      throw badRequest.queryParameter(`${name} must be an RFC 3339 date-time (an offset as Z or ±hh:mm)`, name);
  }
  if (ms.date_from !== undefined && ms.date_to !== undefined && !(ms.date_from < ms.date_to))
    throw badRequest.queryParameter('date_from must be before date_to', 'date_from');
  const to = ms.date_to === undefined ? floorTo(nowMs, unit) + unit : floorTo(ms.date_to, unit);
  const from = floorTo(
    ms.date_from ?? (ms.date_to ?? nowMs) - (minutes ? DEFAULT_MINUTE_WINDOW_MS : DEFAULT_WINDOW_MS),
    unit,
  );
  if (from > to) throw badRequest.queryParameter('date_from must be before date_to', 'date_from');
  if (minutes ? to - from > MAX_MINUTE_WINDOW_HOURS * HOUR_MS : to - from > MAX_WINDOW_DAYS * DAY_MS)
    throw badRequest.queryParameter(
      minutes
        ? `The window of minute buckets is longer than ${MAX_MINUTE_WINDOW_HOURS} hours`
        : `The window is longer than ${MAX_WINDOW_DAYS} days`,
      'date_from',
    );
  const scaleFactor: StatsScaleFactor = query.scale_factor ?? (to - from <= HOURS_UP_TO_MS ? 3600 : 86400);
  const size = scaleFactor * 1000;
  const buckets: string[] = [];
  const first = floorTo(from, size);
  const last = floorTo(to, size);
  if (first < FIRST_MS || last + size >= END_MS)
    throw badRequest.queryParameter('The window must lie within the years 0000 to 9999', 'date_from');
  for (let start = first; start <= last; start += size) buckets.push(iso(start));
  const bucketKeyLength = scaleFactor === 60 ? 16 : scaleFactor === 3600 ? 13 : 10;
  return {
    dateFrom: iso(from),
    dateTo: iso(to),
    scaleFactor,
    buckets,
    firstMinute: minuteOf(buckets[0]!),
    endMinute: minuteOf(iso(last + size)),
    bucketKeyLength,
  };
}

/** One bucket's counts as the store sums them: its key (the start's first `bucketKeyLength` characters). */
export interface BucketCount {
  bucket: string;
  delivered: number;
  failed: number;
}

/** The original's `window`, `buckets` and `metrics`: every bucket of the window, those without attempts as 0. */
export function presentStats(
  window: StatsWindow,
  counts: readonly BucketCount[],
): Pick<StreamStats, 'window' | 'buckets' | 'metrics'> {
  const index = new Map(window.buckets.map((start, i) => [start.slice(0, window.bucketKeyLength), i]));
  const delivered = new Array<number>(window.buckets.length).fill(0);
  const failed = new Array<number>(window.buckets.length).fill(0);
  for (const count of counts) {
    const i = index.get(count.bucket);
    if (i === undefined) continue;
    delivered[i]! += count.delivered;
    failed[i]! += count.failed;
  }
  const sum = (data: number[]) => data.reduce((total, n) => total + n, 0);
  return {
    window: {
      date_from: window.dateFrom,
      date_to: window.dateTo,
      bucket_interval: { scale_factor: window.scaleFactor },
    },
    buckets: window.buckets,
    metrics: [
      { name: 'svc.event_streams.successful_deliveries', window_total: sum(delivered), type: 'sum', data: delivered },
      { name: 'svc.event_streams.failed_deliveries', window_total: sum(failed), type: 'sum', data: failed },
    ],
  };
}
