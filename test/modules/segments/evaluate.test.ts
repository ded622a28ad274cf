import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { contains, evaluateSegment, holds, ruleMatches } from '../../../src/modules/segments/evaluate.ts';
import type { Expression, Rule, SignInContext } from '../../../src/modules/segments/schema.ts';

describe('segment evaluation (pure)', () => {
  it('contains: the same answers as String.prototype.includes', () => {
    const letters = ['a', 'b', 'é', '\u{1F600}'];
    const words = (n: number) => {
      const out = [''];
      for (let length = 1; length <= n; length++)
        for (const prefix of out.filter((w) => [...w].length === length - 1))
          for (const letter of letters) out.push(prefix + letter);
      return out;
    };
    const texts = words(4);
    const patterns = words(3);
    for (const text of texts)
      for (const pattern of patterns)
        assert.equal(
          contains(text, pattern),
          text.includes(pattern),
          `${JSON.stringify(text)} ⊇ ${JSON.stringify(pattern)}`,
        );
    assert.equal(contains('a'.repeat(2048), `${'a'.repeat(511)}b${'a'.repeat(511)}`), false);
    assert.equal(contains(`${'a'.repeat(1000)}b${'a'.repeat(1048)}`, `${'a'.repeat(511)}b${'a'.repeat(511)}`), true);
  });

  it('contains: reads each character of the value and the pattern a bounded number of times, whatever they hold', () => {
    // Counted, not timed: a String object whose charCodeAt counts its calls. String.prototype.includes
    // may take |value|·|pattern| steps on input like this (a×2048 against a×511 b a×511).
    const counting = (text: string) => {
      const wrapped = Object.assign(new String(text), { calls: 0 });
      wrapped.charCodeAt = (index: number) => {
        wrapped.calls++;
        return text.charCodeAt(index);
      };
      return wrapped;
    };
    const value = counting('a'.repeat(2048));
    const pattern = counting(`${'a'.repeat(511)}b${'a'.repeat(511)}`);
    assert.equal(contains(value as unknown as string, pattern as unknown as string), false);
    assert.ok(value.calls <= 3 * 2048, `${value.calls} reads of the value`);
    assert.ok(pattern.calls <= 6 * (1023 + 2048), `${pattern.calls} reads of the pattern`);
  });

  it('holds: one criterion against one context value', () => {
    const table: Array<[Expression, string | undefined, boolean]> = [
      [['US', 'CA'], 'CA', true],
      [['US', 'CA'], 'us', false], // case-sensitive
      [['US'], 'USA', false], // whole value, not a prefix
      [['US'], undefined, false],
      [[''], '', false], // an empty value counts as absent
      [{ contains: ['Chrome', 'Firefox'] }, 'Mozilla/5.0 Firefox/120', true],
      [{ contains: ['chrome'] }, 'Chrome/120', false],
      [{ contains: ['x'] }, undefined, false],
      [{ starts_with: ['admin.', 'ops.'] }, 'ops.example.com', true],
      [{ starts_with: ['admin.'] }, 'example.admin.com', false],
      [{ ends_with: ['@corp.example'] }, 'me@corp.example', true],
      [{ ends_with: ['@corp.example'] }, 'me@corp.example.org', false],
      [{ ends_with: ['x'] }, undefined, false],
      [{ exists: true }, 'anything', true],
      [{ exists: true }, '', false],
      [{ exists: true }, undefined, false],
      [{ exists: false }, undefined, true],
      [{ exists: false }, '', true],
      [{ exists: false }, 'present', false],
    ];
    for (const [expression, value, expected] of table) {
      assert.equal(holds(expression, value), expected, `${JSON.stringify(expression)} on ${JSON.stringify(value)}`);
    }
  });

  it('rules: every match criterion holds and no not_match criterion holds', () => {
    const table: Array<[Rule, SignInContext, boolean]> = [
      [{ match: { country: ['US'], browser: ['Chrome'] } }, { country: 'US', browser: 'Chrome' }, true],
      [{ match: { country: ['US'], browser: ['Chrome'] } }, { country: 'US', browser: 'Safari' }, false], // AND
      [{ match: { country: ['US'] } }, { country: 'US', region: 'CA' }, true], // other attributes are ignored
      // not_match excludes as soon as ANY of its criteria holds.
      [{ not_match: { country: ['US'], browser: ['Chrome'] } }, { country: 'FR', browser: 'Safari' }, true],
      [{ not_match: { country: ['US'], browser: ['Chrome'] } }, { country: 'FR', browser: 'Chrome' }, false],
      [{ not_match: { country: ['US'] } }, {}, true], // an absent attribute never holds, so it never excludes
      [{ not_match: { country: { exists: false } } }, {}, false], // ...except exists: false, which holds
      [{ not_match: { country: { exists: false } } }, { country: 'DE' }, true],
      [{ match: { country: { exists: false } } }, { region: 'CA' }, true],
      [
        { match: { domain: { ends_with: ['example.com'] } }, not_match: { country: ['US'] } },
        { domain: 'a.example.com', country: 'DE' },
        true,
      ],
      [
        { match: { domain: { ends_with: ['example.com'] } }, not_match: { country: ['US'] } },
        { domain: 'a.example.com', country: 'US' },
        false,
      ],
      [{ match: { domain: { ends_with: ['example.com'] } }, not_match: { country: ['US'] } }, { country: 'DE' }, false],
    ];
    for (const [rule, context, expected] of table) {
      assert.equal(ruleMatches(rule, context), expected, `${JSON.stringify(rule)} on ${JSON.stringify(context)}`);
    }
  });

  it('segments: any rule matches, the first matching index is reported', () => {
    const rules: Rule[] = [
      { match: { country: ['US'] } },
      { match: { browser: { exists: true } } },
      { not_match: { platform: { exists: true } } },
    ];
    assert.deepEqual(evaluateSegment(rules, { country: 'US', browser: 'Chrome' }), { matches: true, rule_index: 0 });
    assert.deepEqual(evaluateSegment(rules, { country: 'DE', browser: 'Chrome' }), { matches: true, rule_index: 1 });
    assert.deepEqual(evaluateSegment(rules, { country: 'DE' }), { matches: true, rule_index: 2 });
    assert.deepEqual(evaluateSegment(rules, { country: 'DE', platform: 'Linux' }), {
      matches: false,
      rule_index: null,
    });
  });
});
