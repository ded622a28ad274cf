import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import boundaries from './eslint/boundaries.js';

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'dist/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    plugins: { tenantry: boundaries },
    rules: {
      'tenantry/boundaries': 'error',
      // Unused parameters named with a leading underscore are part of a signature (handlers, callbacks).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // Non-null assertions document invariants the types cannot express; each is reviewed like code.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // NUL and other control characters are matched on purpose: they are what the server refuses.
      'no-control-regex': 'off',
      // Errors leave the API only through the catalogue.
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='ApiError']",
          message: 'Make API errors with a named factory of src/http/errors.ts.',
        },
        {
          selector: "CallExpression[callee.object.name='console']",
          message: "Log through the server's logger (src/logger.ts); console is for the CLI's own output.",
        },
      ],
    },
  },
  {
    // The console runs in the browser. (TypeScript checks its globals: console/tsconfig.json has the DOM
    // library and no Node types, so a Node global there fails `npm run typecheck`.)
    files: ['console/**'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    // A native addon's package is CommonJS, as Node-API addons are loaded (native/malloc-trim).
    files: ['native/**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['src/http/errors.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
  {
    // The CLI talks to a person; tests, benchmarks and scripts print their own reports.
    files: ['src/cli/**', 'test/**', 'bench/**', 'chaos/**', 'bin/**', 'scripts/**', 'eslint/**', 'eslint.config.js'],
    rules: { 'no-restricted-syntax': 'off' },
  },
  {
    // Tests and benchmarks read JSON bodies of every shape field by field.
    files: ['test/**', 'bench/**', 'chaos/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
