import {
  LimitNode,
  OffsetNode,
  OperationNodeTransformer,
  RawNode,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely';

/**
 * A LIMIT or OFFSET written for SQLite: its bound value inside `CAST(… AS INTEGER)`.
 *
 * Why: SQLite (3.53, as better-sqlite3 builds it) plans with the value of a LIMIT or OFFSET that is a
 * bare bound parameter, and so marks the statement to be compiled again whenever that parameter is
 * bound. better-sqlite3 binds every parameter at every run, so a cached statement was compiled again
 * at each run, and a new one twice (the delivery claim: about 300 µs a claim on an empty table, 60 µs
 * with its limits cast; docs/benchmarks.md). Cast, the value is an expression the planner leaves
 * alone, evaluated once per run as before; the plans do not depend on it.
 */
export const sqliteLimit = (parameter: string): string => `CAST(${parameter} AS INTEGER)`;

/** The casts this plugin wrote: a subquery's is met again when its outer query is transformed. */
const casts = new WeakSet<OperationNode>();

function castInteger(node: OperationNode): OperationNode {
  if (casts.has(node)) return node;
  const cast = RawNode.create(['CAST(', ' AS INTEGER)'], [node]);
  casts.add(cast);
  return cast;
}

class CastLimits extends OperationNodeTransformer {
  protected override transformLimit(node: LimitNode): LimitNode {
    return casts.has(node.limit) ? node : LimitNode.create(castInteger(this.transformNode(node.limit)));
  }

  protected override transformOffset(node: OffsetNode): OffsetNode {
    return casts.has(node.offset) ? node : OffsetNode.create(castInteger(this.transformNode(node.offset)));
  }
}

/**
 * Whether a LIMIT or OFFSET is anywhere in the query, found without copying it (a transformer rebuilds
 * every node it walks, 2–3 µs on a query of a few conditions). A list of rows to insert is not looked
 * through: its values are most of an insert's nodes and hold no LIMIT.
 */
function hasLimit(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(hasLimit);
  if (node === null || typeof node !== 'object') return false;
  const kind = (node as OperationNode).kind;
  if (kind === 'LimitNode' || kind === 'OffsetNode') return true;
  if (kind === 'ValuesNode' || kind === 'ValueNode' || kind === 'PrimitiveValueListNode') return false;
  for (const key in node) {
    if (hasLimit((node as Record<string, unknown>)[key])) return true;
  }
  return false;
}

/** Writes every LIMIT and OFFSET of the queries Kysely builds for SQLite as sqliteLimit does. */
export class SqliteLimitPlugin implements KyselyPlugin {
  private readonly transformer = new CastLimits();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return hasLimit(args.node) ? this.transformer.transformNode(args.node) : args.node;
  }

  transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(args.result);
  }
}
