import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventIdCuts, idPattern, newId, randomString } from '../../src/ids.ts';

describe('event ids', () => {
  it("keep the original's format and sort as they were made, however many in one millisecond", () => {
    const ids = Array.from({ length: 200_000 }, () => newId.event());
    for (const id of ids) assert.match(id, idPattern.event);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1]! < ids[i]!, `${ids[i - 1]} then ${ids[i]}`);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('begin with the time in milliseconds and draw their last 14 characters afresh each millisecond', async () => {
    const before = newId.event();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const after = newId.event();
    assert.ok(before.slice(4, 12) < after.slice(4, 12), `${before} then ${after}: the time part grows`);
    assert.notEqual(before.slice(12), after.slice(12));
    // The time part reads back as the time the id was made.
    const digits = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
    const ms = [...after.slice(4, 12)].reduce((n, c) => n * 58 + digits.indexOf(c), 0);
    assert.ok(Math.abs(ms - Date.now()) < 1000, `${after} reads as ${new Date(ms).toISOString()}`);
    // Tails are random: ids made a millisecond or more apart share no tail.
    const tails = new Set<string>();
    for (let i = 0; i < 50; i++) {
      tails.add(newId.event().slice(12));
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    assert.equal(tails.size, 50);
  });
});

describe('eventIdCuts', () => {
  const ids = Array.from({ length: 10_000 }, () => newId.event());

  it('cuts the ids after one up to another into ranges that hold about as many ids each', () => {
    const [first, last] = [ids[0]!, ids.at(-1)!];
    for (const parts of [2, 3, 4]) {
      const cuts = eventIdCuts(first, last, parts);
      assert.equal(cuts.length, parts - 1);
      const bounds = [first, ...cuts, last];
      for (const cut of cuts) assert.match(cut, idPattern.event);
      for (let i = 1; i < bounds.length; i++) assert.ok(bounds[i - 1]! < bounds[i]!, `${bounds[i - 1]} < ${bounds[i]}`);
      // Ids made at random (their tails) across a span: each range holds its share within a few percent.
      const random = Array.from(
        { length: 20_000 },
        () => `evt_${randomString('123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz', 22)}`,
      );
      const [low, high] = ['evt_1111111111111111111111', 'evt_zzzzzzzzzzzzzzzzzzzzzz'];
      const even = [low, ...eventIdCuts(low, high, parts), high];
      for (let i = 1; i < even.length; i++) {
        const share = random.filter((id) => id > even[i - 1]! && id <= even[i]!).length / random.length;
        assert.ok(Math.abs(share - 1 / parts) < 0.03, `range ${i} of ${parts} holds ${share}`);
      }
    }
  });

  it('cuts none where it cannot: ids too close, one part, or ids not of events', () => {
    const [a, b] = ['evt_1111111111111111111111', 'evt_1111111111111111111112'];
    assert.deepEqual(eventIdCuts(a, b, 2), [], 'neighbours');
    assert.deepEqual(eventIdCuts(a, 'evt_1111111111111111111113', 4), ['evt_1111111111111111111112'], 'one id between');
    assert.deepEqual(eventIdCuts(ids[0]!, ids.at(-1)!, 1), []);
    assert.deepEqual(eventIdCuts('evt_short', ids.at(-1)!, 2), []);
    assert.deepEqual(eventIdCuts(ids[0]!, 'est_1111111111111111111111', 2), []);
  });
});
