import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  commaList,
  dateTimeMs,
  listingFilter,
  redeliveryFilter,
} from '../../../../src/modules/event-streams/delivery-filters.ts';

describe('which failed deliveries a request is about', () => {
  it('reads comma-separated values, trimmed, without blanks', () => {
    assert.deepEqual(commaList(' user.created, ,user.deleted '), ['user.created', 'user.deleted']);
    assert.equal(commaList(' , '), undefined);
    assert.equal(commaList(undefined), undefined);
  });

  it('a listing whose statuses leave out failed matches nothing', () => {
    assert.equal(listingFilter({ statuses: 'delivered,pending' }), undefined);
    assert.deepEqual(listingFilter({ statuses: 'pending, failed' }), {});
    assert.deepEqual(listingFilter({ statuses: ' , ' }), {});
  });

  it('a listing takes its event types and its time window, times with milliseconds as they are stored', () => {
    assert.deepEqual(
      listingFilter({
        event_types: 'user.created,user.updated',
        date_from: '2025-01-01T00:00:00Z',
        date_to: '2025-02-01T00:00:00Z',
      }),
      {
        eventTypes: ['user.created', 'user.updated'],
        timeFrom: '2025-01-01T00:00:00.000Z',
        timeTo: '2025-02-01T00:00:00.000Z',
      },
    );
    assert.deepEqual(listingFilter({ event_types: ',' }), {});
  });

  it('a redelivery whose statuses leave out failed matches nothing; an empty list of types means every type', () => {
    assert.equal(redeliveryFilter({ statuses: [] }), undefined);
    assert.deepEqual(redeliveryFilter({ statuses: ['failed'], event_types: [] }), {});
    assert.deepEqual(redeliveryFilter({ event_types: ['user.deleted'], date_from: '2025-01-01T10:00:00Z' }), {
      eventTypes: ['user.deleted'],
      timeFrom: '2025-01-01T10:00:00.000Z',
    });
    assert.deepEqual(redeliveryFilter({ date_to: '2025-01-01T10:00:00Z' }), { timeTo: '2025-01-01T10:00:00.000Z' });
  });

  it('takes a leap second as the first instant of the next minute, as POSIX time does', () => {
    assert.equal(dateTimeMs('2016-12-31T23:59:60Z'), Date.parse('2017-01-01T00:00:00Z'));
    assert.equal(dateTimeMs('2016-12-31T23:59:60.5Z'), Date.parse('2017-01-01T00:00:00.500Z'));
    assert.equal(dateTimeMs('2016-12-31T23:59:59Z'), Date.parse('2016-12-31T23:59:59Z'));
    assert.deepEqual(redeliveryFilter({ date_from: '2016-12-31T23:59:60Z' }), { timeFrom: '2017-01-01T00:00:00.000Z' });
    assert.deepEqual(listingFilter({ date_to: '2016-12-31T23:59:60Z' }), { timeTo: '2017-01-01T00:00:00.000Z' });
  });

  it('names each event type once however often a request repeats it', () => {
    const repeated = [...Array<string>(50_000).fill('user.created'), 'user.deleted', 'user.created'];
    assert.deepEqual(redeliveryFilter({ event_types: repeated as never }), {
      eventTypes: ['user.created', 'user.deleted'],
    });
    assert.deepEqual(listingFilter({ event_types: 'user.created,user.created, user.created' }), {
      eventTypes: ['user.created'],
    });
  });
});
