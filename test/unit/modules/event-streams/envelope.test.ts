import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { envelope, envelopeJson } from '../../../../src/modules/event-streams/envelope.ts';
import type { EventRow } from '../../../../src/modules/event-streams/store/deliveries.ts';

/** Data as the outbox stores it: what JSON.stringify wrote. */
const stored = (data: unknown): string => JSON.stringify(data);

const event = (overrides: Partial<EventRow>): EventRow => ({
  id: 'evt_01JD3Z4Q5R6S7T8U9V0W1X2Y3Z',
  tenant_id: 'ten_default',
  type: 'user.created',
  time: '2026-11-25T00:00:00.000Z',
  source: 'urn:svc:tenant.example',
  data: stored({ object: { user_id: 'svc|1', email: 'a@example.com' } }),
  purpose: null,
  ...overrides,
});

describe('the envelope as a webhook receives it', () => {
  it('is byte for byte JSON.stringify of the envelope, for every kind of stored data', () => {
    const data = [
      { object: {} },
      {
        object: {
          user_id: 'svc|6500000a0000000000000000',
          name: 'Zoë "Quotes" \\ back\\slash\nnew line\ttab \u2028 \u0000 ☃ 𝄞',
          logins_count: 0,
          ratio: -1.5e-7,
          big: 1e21,
          blocked: false,
          last_ip: null,
          identities: [{ provider: 'svc', isSocial: false, profileData: { nested: [1, [2, [3]]] } }],
          app_metadata: { ['__proto__']: { polluted: true }, 'key with "quote"': '' },
        },
      },
      [],
      'a string',
      42,
      null,
    ];
    for (const value of data) {
      for (const purpose of [null, 'test'] as const) {
        const row = event({ data: stored(value), purpose });
        assert.equal(
          envelopeJson(row.id, row, 'est_abc'),
          JSON.stringify(envelope(row, 'est_abc')),
          JSON.stringify(value),
        );
      }
    }
  });

  it('escapes the other members as JSON does, and carries the stream and test mark', () => {
    const row = event({ source: 'urn:svc:"odd"\\host', type: 'user.updated', purpose: 'test' });
    const parsed = JSON.parse(envelopeJson(row.id, row, 'est_"x"')) as Record<string, unknown>;
    assert.equal(parsed.source, 'urn:svc:"odd"\\host');
    assert.equal(parsed.a0stream, 'est_"x"');
    assert.equal(parsed.a0purpose, 'test');
    assert.deepEqual(Object.keys(parsed), [
      'id',
      'source',
      'specversion',
      'type',
      'time',
      'data',
      'a0tenant',
      'a0stream',
      'a0purpose',
    ]);
  });
});
