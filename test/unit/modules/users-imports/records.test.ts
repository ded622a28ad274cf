import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  FileFormatError,
  MAX_RECORD_BYTES,
  nestingDepth,
  RecordSplitter,
  type FileRecord,
} from '../../../../src/modules/users-imports/records.ts';

/** Splits `text` fed in chunks of `size` bytes. */
function split(text: string | Buffer, size: number): FileRecord[] {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const splitter = new RecordSplitter();
  const records: FileRecord[] = [];
  for (let i = 0; i < bytes.length; i += size) records.push(...splitter.push(bytes.subarray(i, i + size)));
  records.push(...splitter.end());
  return records;
}

const users = [
  { email: 'a@example.com', name: 'Ann "the [first]" {A}' },
  { email: 'b@example.com', user_metadata: { list: [1, 2, { deep: ']}' }], escaped: 'back\\slash\\' } },
  { email: 'ç@example.com', name: 'Zoë 😀 ü' },
];

describe('the users file, split into records as it arrives', () => {
  it('splits a JSON array the same at every chunk size, with offsets to resume from', () => {
    const text = `\uFEFF  [\n${users.map((u) => JSON.stringify(u)).join(' ,\n ')}\n] \n`;
    const whole = split(text, text.length + 1);
    assert.deepEqual(
      whole.map((r) => JSON.parse(r.text)),
      users,
    );
    assert.deepEqual(
      whole.map((r) => r.position),
      [1, 2, 3],
    );
    for (const size of [1, 2, 3, 7, 64]) assert.deepEqual(split(text, size), whole, `chunks of ${size}`);
    // Resuming after each record yields exactly the records after it.
    const bytes = Buffer.from(text);
    for (const [index, record] of whole.entries()) {
      const resumed = new RecordSplitter({ format: 'json', end: record.end, position: record.position });
      const rest = [...resumed.push(bytes.subarray(record.end)), ...resumed.end()];
      assert.deepEqual(rest, whole.slice(index + 1));
    }
  });

  it('splits NDJSON by line, numbering lines (blank ones included) and resuming after any of them', () => {
    const text = `\n${JSON.stringify(users[0])}\r\n\n${JSON.stringify(users[1])}\n${JSON.stringify(users[2])}`;
    const whole = split(text, 1000);
    assert.deepEqual(
      whole.map((r) => [r.position, JSON.parse(r.text)]),
      [
        [2, users[0]],
        [4, users[1]],
        [5, users[2]],
      ],
    );
    assert.equal(whole[2]!.end, Buffer.byteLength(text));
    for (const size of [1, 5, 13]) assert.deepEqual(split(text, size), whole, `chunks of ${size}`);
    const bytes = Buffer.from(text);
    const resumed = new RecordSplitter({ format: 'ndjson', end: whole[0]!.end, position: whole[0]!.position });
    assert.deepEqual([...resumed.push(bytes.subarray(whole[0]!.end)), ...resumed.end()], whole.slice(1));
  });

  it('yields bare values and arrays as records (they fail as users later, one by one)', () => {
    assert.deepEqual(
      split('[1, "x", [2], null,{}]', 3).map((r) => r.text),
      ['1', '"x"', '[2]', 'null', '{}'],
    );
    assert.deepEqual(split('[ ]', 1), []);
  });

  it('refuses what is neither a JSON array nor NDJSON, and a file cut off', () => {
    const refusals: Array<[string, RegExp]> = [
      ['', /empty/],
      ['   \n', /empty/],
      ['"users"', /must be a JSON array/],
      ['[{"a":1} {"b":2}]', /',' or '\]' was expected/],
      ['[{"a":1},]', /a user was expected/],
      ['[,{"a":1}]', /a user was expected/],
      ['[{"a":1}] x', /nothing may follow/],
      ['[{"a":1}', /before the array of users is closed/],
      ['[{"a":"1}]', /ends inside record 1/],
      ['[{"a":1},{"b":[', /ends inside record 2/],
    ];
    for (const [text, message] of refusals) {
      for (const size of [1, 100]) {
        assert.throws(
          () => split(text, size),
          (error: unknown) => error instanceof FileFormatError && message.test(error.message),
          `${JSON.stringify(text)} in chunks of ${size}`,
        );
      }
    }
  });

  it('refuses a record longer than the limit, without holding more than it', () => {
    const long = JSON.stringify({ name: 'x'.repeat(MAX_RECORD_BYTES) });
    assert.throws(() => split(`[${long}]`, 64 * 1024), /record 1 is longer than/);
    assert.throws(() => split(`{"a":1}\n${long}\n`, 64 * 1024), /record 2 is longer than/);
  });

  it('measures how deeply a record nests, brackets in strings and escaped quotes aside', () => {
    assert.equal(nestingDepth('42'), 0);
    assert.equal(nestingDepth('{"a":[1,{"b":[]}],"c":{}}'), 4);
    assert.equal(nestingDepth('{"a":"[[[{{{\\"[[[","b":[]}'), 2);
    assert.equal(nestingDepth(`${'['.repeat(5000)}${']'.repeat(5000)}`), 5000);
    const depthOf = (value: unknown): number =>
      typeof value === 'object' && value !== null ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0;
    fc.assert(fc.property(fc.jsonValue(), (value) => nestingDepth(JSON.stringify(value)) === depthOf(value)));
  });

  it('matches JSON.parse on any array of JSON values, in any chunking', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue(), { maxLength: 8 }), fc.integer({ min: 1, max: 50 }), (values, size) => {
        const records = split(JSON.stringify(values, null, values.length % 2 ? 1 : undefined), size);
        assert.deepEqual(
          records.map((r) => JSON.parse(r.text)),
          JSON.parse(JSON.stringify(values)),
        );
      }),
      { numRuns: 300 },
    );
  });
});
