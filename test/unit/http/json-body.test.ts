import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseJsonBody } from '../../../src/http/json-body.ts';

describe('parseJsonBody', () => {
  it('parses JSON as JSON.parse does', () => {
    assert.deepEqual(parseJsonBody('{"a":[1,{"b":"c"}],"d":null}'), { value: { a: [1, { b: 'c' }], d: null } });
    assert.deepEqual(parseJsonBody('"\\u00e9t\\u00e9"'), { value: 'été' });
    assert.deepEqual(parseJsonBody('{"a":'), { refused: 'malformed' });
  });

  it('drops __proto__ members at any depth, however they are spelled, and nothing else', () => {
    const { value } = parseJsonBody(
      '{"__proto__":{"x":1},"a":{"\\u005f_proto__":{"y":2},"keep":1},"list":[{"__proto__":3,"n":4}],"__proto":5}',
    ) as { value: Record<string, unknown> };
    assert.deepEqual(JSON.parse(JSON.stringify(value)), { a: { keep: 1 }, list: [{ n: 4 }], __proto: 5 });
    for (const object of [value, value.a, (value.list as unknown[])[0]])
      assert.equal(Object.hasOwn(object as object, '__proto__'), false);
    // Nothing reaches a prototype: not the parsed objects', not Object.prototype.
    assert.equal(Object.getPrototypeOf(value), Object.prototype);
    assert.equal(({} as Record<string, unknown>).x, undefined);
  });

  it('drops them however deep, without recursion', () => {
    const depth = 50_000;
    const { value } = parseJsonBody(`${'{"a":'.repeat(depth)}{"__proto__":1,"z":2}${'}'.repeat(depth)}`) as {
      value: Record<string, unknown>;
    };
    let innermost = value;
    for (let i = 0; i < depth; i++) innermost = innermost.a as Record<string, unknown>;
    assert.deepEqual(Object.keys(innermost), ['z']);
  });

  it('refuses a lone surrogate, in a value or a member name, and keeps a pair', () => {
    assert.deepEqual(parseJsonBody('{"name":"\\ud800"}'), { refused: 'loneSurrogate' });
    assert.deepEqual(parseJsonBody('{"\\udc00":1}'), { refused: 'loneSurrogate' });
    assert.deepEqual(parseJsonBody('{"name":"\\ud83d\\ude00"}'), { value: { name: '😀' } });
  });
});
