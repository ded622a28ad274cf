import { CRITERIA_KEYS, type Conditions, type Expression, type Rule, type SignInContext } from './schema.ts';

export interface Evaluation {
  matches: boolean;
  /** Index of the first rule that matched; null when none did. */
  rule_index: number | null;
}

/** A segment matches when any of its rules does; the first matching rule is reported. */
export function evaluateSegment(rules: readonly Rule[], context: SignInContext): Evaluation {
  const index = rules.findIndex((rule) => ruleMatches(rule, context));
  return index < 0 ? { matches: false, rule_index: null } : { matches: true, rule_index: index };
}

/** Every `match` criterion holds, and not a single `not_match` criterion holds. */
export function ruleMatches(rule: Rule, context: SignInContext): boolean {
  if (rule.match && !criteria(rule.match).every(([key, expression]) => holds(expression, context[key]))) return false;
  if (rule.not_match && criteria(rule.not_match).some(([key, expression]) => holds(expression, context[key])))
    return false;
  return true;
}

function criteria(conditions: Conditions): Array<[keyof SignInContext, Expression]> {
  return CRITERIA_KEYS.flatMap((key) => {
    const expression = conditions[key];
    return expression === undefined ? [] : [[key, expression] as [keyof SignInContext, Expression]];
  });
}

/**
 * Case-sensitive comparisons. An empty string counts as absent, and on an absent attribute only
 * `{exists: false}` holds.
 */
export function holds(expression: Expression, value: string | undefined): boolean {
  const present = value !== undefined && value !== '';
  if (!Array.isArray(expression) && 'exists' in expression) return expression.exists === present;
  if (!present) return false;
  if (Array.isArray(expression)) return expression.includes(value);
  if ('contains' in expression) return expression.contains.some((s) => value.includes(s));
  if ('starts_with' in expression) return expression.starts_with.some((s) => value.startsWith(s));
  return expression.ends_with.some((s) => value.endsWith(s));
}
