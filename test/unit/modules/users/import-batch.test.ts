import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  batchSpace,
  batchUsers,
  importBatchOf,
  ImportBatchBuilder,
  type ImportBatch,
} from '../../../../src/modules/users/import-batch.ts';
import { importRow, type ImportedUser } from '../../../../src/modules/users/imported-user.ts';

const AT = '2024-01-02T03:04:05.000Z';

const rowsOf = (batch: ImportBatch) => {
  const users = batchUsers(batch);
  return Array.from({ length: users.size }, (_, i) => users.row(i));
};

// Each with a user_id, so that its row does not depend on a new id.
const records: ImportedUser[] = [
  { user_id: 'svc|1', email: 'ascii@example.com', password_hash: '$2b$10$abcdefghijklmnopqrstuv' },
  // Two- and three-byte characters, and a surrogate pair (four bytes).
  { user_id: 'svc|2', email: 'zoë@example.com', given_name: 'Zoë', family_name: '東京', nickname: '🦊 fox' },
  // No email, no password: nulls.
  { user_id: 'svc|3', username: 'only-a-username' },
  // An empty string is not a null.
  { user_id: 'svc|4', username: 'x', user_metadata: { note: '' } },
  {
    user_id: 'google-oauth2|5',
    identities: [
      { provider: 'google-oauth2', connection: 'google-oauth2', user_id: '5', isSocial: true, access_token: 'at-5' },
    ],
  },
];

describe('ImportBatch', () => {
  it('gives back each user as importRow made it: non-ASCII text, nulls and tokens included', () => {
    const rows = rowsOf(importBatchOf(records, AT));
    assert.deepEqual(
      rows,
      records.map((record) => importRow(record, AT)),
    );
    assert.equal(rows[2]!.email, null);
    assert.equal(rows[2]!.password_hash, null);
    assert.equal(rows[4]!.tokens, JSON.stringify([{ access_token: 'at-5' }]));
    assert.equal(batchUsers(importBatchOf(records, AT)).document(1), rows[1]!.document);
  });

  it('grows past its first memory, and writes a batch again where a stored one was', () => {
    // Far more users and bytes than its first memory holds.
    const many = Array.from({ length: 6000 }, (_, i): ImportedUser => ({
      user_id: `svc|${i}`,
      email: `user${i}@example.com`,
      given_name: 'Ünïcödé '.repeat(i % 7),
    }));
    const first = importBatchOf(many, AT);
    assert.ok(first.text.byteLength > 1 << 20);
    assert.deepEqual(
      rowsOf(first),
      many.map((record) => importRow(record, AT)),
    );

    // In the memory of a small batch (it grows), then of a large one.
    for (const space of [batchSpace(importBatchOf(records.slice(0, 1), AT)), batchSpace(first)]) {
      const builder = new ImportBatchBuilder(AT, space);
      for (const record of many.slice(0, 5000)) builder.add(record);
      assert.equal(builder.size, 5000);
      assert.deepEqual(
        rowsOf(builder.build()),
        many.slice(0, 5000).map((record) => importRow(record, AT)),
      );
    }
  });

  it('is empty without records', () => {
    assert.equal(batchUsers(importBatchOf([], AT)).size, 0);
  });
});
