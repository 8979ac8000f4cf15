/**
 * The import rules of docs/architecture.md, checked by dependency-cruiser (`npm run lint:imports`,
 * run by test/architecture/rules.test.ts): no cycles; the libraries (bagit, fixity, fs) use
 * nothing of the daemon's; problems.ts is a leaf; download knows no web framework; from outside
 * a module with an index.ts, only its index.ts is imported.
 */
const LIBRARIES = '^src/(bagit|fixity|fs|ocfl/validate)/';
const DAEMON = '^src/(audit|auth|catalog|commands|config|download|http|ingest|process|replicas|service|storage)/|^src/(daemon|cli|logger|metrics|failpoints)\\.ts$';

module.exports = {
  forbidden: [
    { name: 'no-cycles', severity: 'error', comment: 'No import cycles, type-only ones included.', from: { path: '^src/' }, to: { circular: true } },
    {
      name: 'libraries-know-no-daemon',
      severity: 'error',
      comment: 'bagit/, fixity/ and fs/ are libraries another project could lift out: they import only each other (bagit → fixity → fs), the leaf problems.ts, and node.',
      from: { path: LIBRARIES },
      to: { path: DAEMON },
    },
    { name: 'fixity-knows-no-bagit', severity: 'error', from: { path: '^src/fixity/' }, to: { path: '^src/bagit/' } },
    { name: 'problems-is-a-leaf', severity: 'error', comment: 'defineProblems serves the libraries and the daemon alike.', from: { path: '^src/problems\\.ts$' }, to: { path: '^src/' } },
    { name: 'fs-is-a-leaf', severity: 'error', from: { path: '^src/fs/' }, to: { path: '^src/(?!fs/)' } },
    {
      name: 'service-is-a-leaf',
      severity: 'error',
      comment: 'service/ is the lifecycle and the slots every background service shares; it knows none of them.',
      from: { path: '^src/service/' },
      to: { path: '^src/(?!service/)' },
    },
    {
      name: 'download-knows-no-framework',
      severity: 'error',
      comment: 'download/ answers with values; http/send-download.ts is the fastify glue.',
      from: { path: '^src/download/' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-peer'], path: 'node_modules/(fastify|@fastify)/' },
    },
    {
      name: 'through-the-index',
      severity: 'error',
      comment: 'A module with an index.ts is used through it, never by reaching into its files.',
      from: { path: '^src/(.+)/[^/]+$' },
      to: { path: '^src/(bagit|fixity|download|ingest/rsync|ingest/chipmunk|replicas)/[^/]+$', pathNot: ['/index\\.ts$', '^src/$1/'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    parser: 'swc', // independent of which TypeScript `typescript` resolves to (docs/decisions.md)
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
