import { Type, type Static, type TSchema } from '@sinclair/typebox';

/** The eleven sign-in attributes a segment can test, in the spec's order. */
export const CRITERIA_KEYS = [
  'client_id',
  'connection',
  'connection_type',
  'organization_id',
  'domain',
  'device_type',
  'browser',
  'platform',
  'user_agent',
  'country',
  'region',
] as const;
export type CriterionKey = (typeof CRITERIA_KEYS)[number];

/** More rules than any hand-written segment needs; bounds storage and evaluation cost. */
export const MAX_RULES = 100;

/**
 * Strings of `contains`, `starts_with` and `ends_with` in all of a segment's rules, at most. Each pattern
 * is searched for in the attribute on every evaluation (up to 2,048 characters, linear time each): 200,000
 * one-character patterns in one rule, 800 KB of body, held the event loop 1.2 s an evaluation, every
 * tenant's requests with it. A thousand keeps the worst evaluation to milliseconds. Lists of values
 * compared whole (`["FR", "DE"]`) are not counted: each costs a comparison.
 */
export const MAX_PATTERNS = 1000;

/** The original's pattern: no NUL, no leading or trailing whitespace. `.` stops at line breaks, so an inner newline is refused. */
const TEXT_PATTERN = '^(?!.*\\x00)\\S(.*\\S)?$';

const Name = Type.String({
  minLength: 3,
  maxLength: 255,
  pattern: TEXT_PATTERN,
  description: 'Name of the segment',
});
const Description = Type.String({
  minLength: 3,
  maxLength: 1024,
  pattern: TEXT_PATTERN,
  description: 'Description of the segment',
});

const Strings = Type.Array(Type.String({ maxLength: 1024 }), { minItems: 1 });

const operator = <K extends string, T extends TSchema>(key: K, value: T) =>
  Type.Object({ [key]: value } as { [P in K]: T }, { additionalProperties: false });

/**
 * Exactly one form per attribute. oneOf, as the original: when no form fits, the message names the
 * attribute and the description lists the forms it accepts.
 */
const Expression = Type.Union(
  [
    Strings,
    operator('contains', Strings),
    operator('starts_with', Strings),
    operator('ends_with', Strings),
    operator('exists', Type.Boolean()),
  ],
  {
    description:
      'one of: an array of strings, {contains: [...]}, {starts_with: [...]}, {ends_with: [...]} or {exists: boolean}',
  },
);
// TypeBox writes unions as anyOf; the original's schema says oneOf (the forms are mutually exclusive anyway).
const ExpressionOneOf = Type.Unsafe<Static<typeof Expression>>({
  oneOf: Expression.anyOf,
  description: Expression.description,
});

const Conditions = Type.Partial(
  Type.Object(
    Object.fromEntries(CRITERIA_KEYS.map((key) => [key, ExpressionOneOf])) as Record<
      CriterionKey,
      typeof ExpressionOneOf
    >,
  ),
  { additionalProperties: false, minProperties: 1, maxProperties: 10 },
);

export const Rule = Type.Object(
  { match: Type.Optional(Conditions), not_match: Type.Optional(Conditions) },
  { additionalProperties: false, minProperties: 1 },
);
const Rules = Type.Array(Rule, {
  minItems: 1,
  maxItems: MAX_RULES,
  description: 'An ordered list of rules. A segment matches if any rule matches.',
});

export type Expression = Static<typeof Expression>;
export type Conditions = Static<typeof Conditions>;
export type Rule = Static<typeof Rule>;

export const SegmentId = Type.Object(
  { id: Type.String({ format: 'segment-id', description: 'Unique identifier for the segment' }) },
  { additionalProperties: false },
);
export type SegmentId = Static<typeof SegmentId>;

export const CreateSegmentBody = Type.Object(
  { name: Name, description: Type.Optional(Description), rules: Rules },
  { additionalProperties: false },
);
export type CreateSegmentBody = Static<typeof CreateSegmentBody>;

export const UpdateSegmentBody = Type.Object(
  {
    name: Type.Optional(Name),
    // string keywords apply to strings only, so null passes them and clears the description.
    description: Type.Optional(Type.Unsafe<string | null>({ ...Description, type: ['string', 'null'] })),
    rules: Type.Optional(Rules),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateSegmentBody = Static<typeof UpdateSegmentBody>;

export const SegmentType = Type.Union([Type.Literal('svc'), Type.Literal('self')]);
export type SegmentType = Static<typeof SegmentType>;

export const ListSegmentsQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ maxLength: 1024, description: 'Cursor from which to start selection' })),
    take: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 50, description: 'Number of results per page. Defaults to 25, maximum 50.' }),
    ),
    // `auth0` is the original's word for `svc`; unmodified clients of the original send it.
    type: Type.Optional(
      Type.Union([Type.Literal('svc'), Type.Literal('self'), Type.Literal('auth0')], {
        description: 'Filter by segment type',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListSegmentsQuery = Static<typeof ListSegmentsQuery>;

export const SegmentResponse = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    description: Type.Optional(Type.String()),
    type: SegmentType,
    rules: Type.Array(Rule),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const ListSegmentsResponse = Type.Object(
  { segments: Type.Array(SegmentResponse), next: Type.Optional(Type.String()) },
  { additionalProperties: false },
);

export const SignInContext = Type.Partial(
  Type.Object(
    Object.fromEntries(CRITERIA_KEYS.map((key) => [key, Type.String({ maxLength: 2048 })])) as Record<
      CriterionKey,
      ReturnType<typeof Type.String>
    >,
  ),
  { additionalProperties: false },
);
export type SignInContext = Static<typeof SignInContext>;

export const EvaluationResponse = Type.Object(
  { matches: Type.Boolean(), rule_index: Type.Union([Type.Integer(), Type.Null()]) },
  { additionalProperties: false },
);

/** How many pattern strings (see MAX_PATTERNS) the rules hold. */
export function patternCount(rules: readonly Rule[]): number {
  let count = 0;
  for (const rule of rules) {
    for (const conditions of [rule.match, rule.not_match]) {
      for (const expression of Object.values(conditions ?? {})) {
        if (expression === undefined || Array.isArray(expression)) continue;
        if ('contains' in expression) count += expression.contains.length;
        else if ('starts_with' in expression) count += expression.starts_with.length;
        else if ('ends_with' in expression) count += expression.ends_with.length;
      }
    }
  }
  return count;
}
