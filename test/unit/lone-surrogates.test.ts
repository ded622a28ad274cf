import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loneSurrogateIn, loneSurrogatePath } from '../../src/lone-surrogates.ts';

describe('lone surrogates', () => {
  it('names the first one in the value’s order, in a string or a member name, as a JSON pointer', () => {
    assert.equal(loneSurrogatePath({ a: 'ok', b: ['x', { c: '\ud800' }], d: '\udc00' }), '/b/1/c');
    assert.equal(loneSurrogatePath({ a: '\ud800', b: '\ud800' }), '/a');
    assert.equal(loneSurrogatePath({ ok: { ['k\udfff']: 1 } }), '/ok/k\udfff');
    assert.equal(loneSurrogatePath({ 'a/b~c': ['\ud800'] }), '/a~1b~0c/0');
    assert.equal(loneSurrogatePath('\ud800'), '');
    // A whole pair, in either form, is text; so are a high half after its low half's pair and plain text.
    assert.equal(loneSurrogatePath({ e: '😀', f: '\ud83d\ude00', g: 'plain', h: 1, i: null }), undefined);
    assert.equal(loneSurrogatePath({ j: '\ude00\ud83d' }), '/j');
  });

  it('looks at parsed JSON only when its text has a surrogate’s escape', () => {
    const text = '{"a":"\\ud800"}';
    assert.equal(loneSurrogateIn(text, JSON.parse(text)), '/a');
    assert.equal(loneSurrogateIn('{"a":"\\\\ud800"}', JSON.parse('{"a":"\\\\ud800"}')), undefined);
    // Deeper than a call stack would go: the first walk keeps a stack of its own.
    let deep: unknown = 'fine';
    for (let i = 0; i < 20_000; i++) deep = [deep];
    assert.equal(loneSurrogatePath(deep), undefined);
  });
});
