/**
 * `preservd grant USER ROLE SCOPE`, `preservd revoke USER ROLE SCOPE`, `preservd grants [USER]`:
 * chipmunk's roles per content type, straight to the catalog (safe while the daemon runs). A
 * refused grant (unknown user, role or content type) changes nothing and exits 1; a malformed
 * command line exits 2.
 */
import { ROLES } from '../catalog/grants.js';
import type { Config } from '../config/config.js';
import { LandingZone } from '../ingest/landing.js';
import { retireLinks, revokeAndRotate } from '../ingest/rotation.js';
import { silentLogger } from '../logger.js';
import { usage, withCatalog, type CommandIO } from './users.js';

const SCOPES = 'a content type or all';

export async function runGrant(argv: string[], io: CommandIO, config: Config): Promise<number> {
  if (argv.length !== 3)
    return usage(io, `preservd grant USER ROLE SCOPE (ROLE: ${ROLES.join(', ')}; SCOPE: ${SCOPES})`);
  const [user, role, scope] = argv as [string, string, string];
  return withCatalog(config, io, (catalog) => {
    const added = catalog.grants.grant(user, role, scope, Object.keys(config.contentTypes));
    io.stdout.write(
      added
        ? `granted ${role} on ${scope} to ${user}\n`
        : `${user} already holds ${role} on ${scope}; nothing changed\n`,
    );
  });
}

export async function runRevoke(argv: string[], io: CommandIO, config: Config): Promise<number> {
  if (argv.length !== 3)
    return usage(io, `preservd revoke USER ROLE SCOPE (ROLE: ${ROLES.join(', ')}; SCOPE: ${SCOPES})`);
  const [user, role, scope] = argv as [string, string, string];
  return withCatalog(config, io, async (catalog, layout) => {
    // The links the user may no longer see are replaced with the revoke (ingest/rotation.ts).
    const outcome = revokeAndRotate(catalog, { user, role, scope });
    io.stdout.write(`revoked ${role} on ${scope} from ${user}\n`);
    if (outcome.rotated.length + outcome.closed.length === 0) return;
    io.stdout.write(
      `upload links replaced: ${outcome.rotated.length}; closed while their ingest runs: ${outcome.closed.length}\n`,
    );
    await retireLinks(catalog, new LandingZone(layout), silentLogger, outcome).catch((err: unknown) => {
      // The revoke and the new links are in the catalog; the running daemon retires the old ones.
      io.stderr.write(
        `preservd: the old upload links are not all retired yet (${(err as Error).message}); the daemon finishes that\n`,
      );
    });
  });
}

export async function runGrants(argv: string[], io: CommandIO, config: Config): Promise<number> {
  if (argv.length > 1) return usage(io, 'preservd grants [USER]');
  const [user] = argv;
  return withCatalog(config, io, (catalog) => {
    if (user !== undefined && catalog.users.get(user) === undefined) throw new Error(`no user "${user}"`);
    const grants = user === undefined ? catalog.grants.list() : catalog.grants.of(user);
    io.stdout.write('user\trole\tscope\n');
    for (const g of grants) io.stdout.write(`${g.user}\t${g.role}\t${g.scope}\n`);
  });
}
