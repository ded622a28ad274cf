// The import boundaries of docs/architecture.md, checked on every import in src/:
//  - a module never imports another module's store (it calls that module's service);
//  - only stores and src/db/ itself reach the database's internals: Kysely, the schema, the claim helper,
//    the SQL error helpers. Everything else gets from src/db/database.ts only what PUBLIC_DATABASE lists.
import path from 'node:path';

const PUBLIC_DATABASE = new Set([
  'Database',
  'Tx',
  'Dialect',
  'transaction',
  'now',
  'nowAfter',
  'openDatabase',
  'migrate',
  'ping',
  'migrationsComplete',
]);
/** How database failures are classified for clients (503s) is public too: the error handler reads it. */
const PUBLIC_DATABASE_FILES = new Set(['src/db/unavailable.ts']);
/** The composition root builds every service and the stores they are handed; it runs no query itself. */
const COMPOSITION_ROOT = 'src/services.ts';

/** src/modules/<name>/… → name; anything else in src/ → its first folder (or file). */
function areaOf(relative) {
  const parts = relative.split('/');
  if (parts[0] !== 'src') return undefined;
  return parts[1] === 'modules' ? `modules/${parts[2]}` : parts[1];
}

const isStore = (relative) => /(^|\/)store(\.ts$|\/)/.test(relative);

export default {
  rules: {
    boundaries: {
      meta: {
        type: 'problem',
        docs: {
          description:
            "Modules reach other modules' tables through their services, and the database only through stores",
        },
        schema: [],
        messages: {
          foreignStore: "{{importer}} imports {{target}}, another module's store: call that module's service instead.",
          databaseInternals: '{{importer}} imports {{what}}: only stores and src/db/ may; call a store.',
        },
      },
      create(context) {
        const root = context.cwd;
        const importer = path.relative(root, context.filename).split(path.sep).join('/');
        const importerArea = areaOf(importer);
        if (importerArea === undefined) return {};
        // Stores and src/db/ may use the database; they may still not reach into another module's store.
        const mayUseDatabase = importerArea === 'db' || isStore(importer);

        function check(node, specifier, names) {
          if (typeof specifier !== 'string') return;
          if (!specifier.startsWith('.')) {
            if ((specifier === 'kysely' || specifier.startsWith('kysely/')) && !mayUseDatabase) {
              context.report({ node, messageId: 'databaseInternals', data: { importer, what: specifier } });
            }
            return;
          }
          const target = path
            .relative(root, path.resolve(path.dirname(context.filename), specifier))
            .split(path.sep)
            .join('/');
          const targetArea = areaOf(target);
          if (isStore(target) && targetArea !== importerArea && importer !== COMPOSITION_ROOT) {
            context.report({ node, messageId: 'foreignStore', data: { importer, target } });
          }
          if (targetArea === 'db' && !mayUseDatabase && !PUBLIC_DATABASE_FILES.has(target)) {
            const internal =
              target !== 'src/db/database.ts' ||
              names === undefined ||
              names.some((name) => !PUBLIC_DATABASE.has(name));
            if (internal) context.report({ node, messageId: 'databaseInternals', data: { importer, what: target } });
          }
        }

        const importedNames = (node) =>
          node.specifiers?.every((s) => s.type === 'ImportSpecifier' || s.type === 'ExportSpecifier')
            ? node.specifiers.map((s) => (s.imported ?? s.local).name)
            : undefined;

        return {
          ImportDeclaration: (node) => check(node, node.source.value, importedNames(node)),
          ExportNamedDeclaration: (node) => node.source && check(node, node.source.value, importedNames(node)),
          ExportAllDeclaration: (node) => check(node, node.source.value, undefined),
          ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value, undefined),
        };
      },
    },
  },
};
