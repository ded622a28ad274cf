import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { idPattern, newId } from '../../src/ids.ts';

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
