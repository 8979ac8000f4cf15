/**
 * typescript-eslint with type information, run by `npm run lint` and test/architecture/rules.test.ts.
 * A small set: the rules that check what the daemon relies on (every promise awaited or handed a
 * catch, no promise where a callback's result is ignored, every union case handled) and a few that
 * cost nothing to keep. tsc's strict flags already cover unused names and most type checks.
 */
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  globalIgnores(['dist/']),
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // tap follows its own subtests: t.test's promise reports a failure as a failed test, never a rejection.
        {
          allowForKnownSafePromises: [
            { from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      '@typescript-eslint/restrict-template-expressions': 'error',
      '@typescript-eslint/no-base-to-string': 'error',
      'no-control-regex': 'error',
    },
  },
  {
    // One job per function as per file (test/architecture/rules.test.ts caps files at 400 lines):
    // a longer function in src/ says why beside it.
    files: ['src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
);
