#!/usr/bin/env node
/**
 * The `preservd` command (CLI.md): serve, user, token, grant, revoke, grants, validate, audit,
 * status, replicas, backup, rebuild, migrate, deaccessions.
 * Each command's modules are loaded when it runs, so `validate` (run once per bag by scripts)
 * does not pay for the daemon's (fastify, lmdb…).
 */
import type { Config } from './config/config.js';
import type { Daemon } from './daemon.js';

const HELP = `usage: preservd <command>

  serve                              run the daemon: API, rsync daemon, watcher, ingest and audits
  user add NAME [--admin]            create a user; its first token is the last line printed
  user list                          users, admin flag, live tokens
  token issue NAME                   a further token for NAME (last line printed)
  token revoke TOKEN_ID              revoke a token
  grant USER ROLE SCOPE              give USER a role (viewer, content_manager, admin) on a
                                     content type or on all
  revoke USER ROLE SCOPE             take that grant away
  grants [USER]                      every grant (of USER): user, role, scope
  validate DIR [--content-type T --external-id X --bag-id B] [--json]
                                     validate a bag offline: exit 0 valid, 1 invalid, 2 could not run
  audit [--wait]                     ask the running daemon for an audit; --wait shows progress,
                                     exits 0 when all passed and 1 when any package failed
  status                             queue, audit and replica summary of the running daemon
  replicas                           per replica: packages verified, pending and failed, bytes,
                                     oldest pending; exits 1 when any package lacks a verified copy
  backup DEST                        a consistent copy of the catalog into DEST (new or empty),
                                     safe while the daemon runs
  rebuild --from NAME [--no-verify]  a new catalog from one storage root (primary or a replica);
                                     daemon stopped, catalog empty; exit 0 all rebuilt, 1 objects
                                     skipped, 2 could not run; run again after a kill to go on
  migrate                            convert a repository of an earlier release (plain bag
                                     folders) to OCFL storage roots, primary and replicas; the
                                     daemon stopped; exit 0 done, 1 packages skipped, 2 could not run
  deaccessions                       deaccession requests and their state (a second admin decides
                                     through the API or the pages)

Configuration: PRESERVD_CONFIG (JSON file), PRESERVD_DATA_DIR, PRESERVD_HTTP_HOST,
PRESERVD_HTTP_PORT, PRESERVD_RSYNC_PORT. See docs/configuration.md.
`;

async function serve(config: Config): Promise<number> {
  const { Daemon } = await import('./daemon.js');
  const { createLogger } = await import('./logger.js');
  const logger = createLogger(config);
  let daemon: Daemon;
  try {
    daemon = await Daemon.start(config, { logger });
  } catch (err) {
    logger.fatal({ err }, 'preservd could not start');
    process.stderr.write(`preservd: ${(err as Error).message}\n`);
    return 1;
  }
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'stopping');
      daemon.stop().then(resolve, (err: unknown) => {
        logger.error({ err }, 'error while stopping');
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const io = { stdout: process.stdout, stderr: process.stderr };
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    (command === undefined ? process.stderr : process.stdout).write(HELP);
    return command === undefined ? 2 : 0;
  }
  if (command === 'validate') return (await import('./commands/validate.js')).runValidate(rest, io);
  // After validate: the configuration's schema (ajv, typebox) is a good part of validate's start-up.
  const { ConfigError, loadConfig } = await import('./config/config.js');
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`preservd: ${err instanceof ConfigError ? err.message : (err as Error).message}\n`);
    return 2;
  }
  switch (command) {
    case 'serve':
      return serve(config);
    case 'user':
      return (await import('./commands/users.js')).runUser(rest, io, config);
    case 'token':
      return (await import('./commands/users.js')).runToken(rest, io, config);
    case 'grant':
      return (await import('./commands/grants.js')).runGrant(rest, io, config);
    case 'revoke':
      return (await import('./commands/grants.js')).runRevoke(rest, io, config);
    case 'grants':
      return (await import('./commands/grants.js')).runGrants(rest, io, config);
    case 'audit':
      return (await import('./commands/audit.js')).runAudit(rest, io, config);
    case 'status':
      return (await import('./commands/status.js')).runStatus(rest, io, config);
    case 'replicas':
      return (await import('./commands/replicas.js')).runReplicas(rest, io, config);
    case 'backup':
      return (await import('./commands/backup.js')).runBackup(rest, io, config);
    case 'rebuild':
      return (await import('./commands/rebuild.js')).runRebuild(rest, io, config);
    case 'migrate':
      return (await import('./commands/migrate.js')).runMigrate(rest, io, config);
    case 'deaccessions':
      return (await import('./commands/deaccessions.js')).runDeaccessions(rest, io, config);
    default:
      process.stderr.write(`preservd: unknown command "${command}"\n\n${HELP}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`preservd: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 2;
  },
);
