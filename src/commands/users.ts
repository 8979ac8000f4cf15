/** `preservd user add|list` and `preservd token issue|revoke`: straight to the catalog (LMDB is safe across processes). */
import { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import { DataLayout } from '../storage/layout.js';

export interface CommandIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export async function runUser(argv: string[], io: CommandIO, config: Config): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === 'add') {
    const name = rest.find((a) => !a.startsWith('--'));
    const unknown = rest.filter((a) => a.startsWith('--') && a !== '--admin');
    if (name === undefined || unknown.length > 0) return usage(io, 'preservd user add NAME [--admin]');
    return withCatalog(config, io, (catalog) => {
      const user = catalog.users.add(name, rest.includes('--admin'));
      const token = catalog.users.issueToken(user.name);
      io.stdout.write(
        `created ${user.admin ? 'admin' : 'user'} ${user.name}; token id ${token.id} (shown once, keep it safe):\n${token.secret}\n`,
      );
    });
  }
  if (verb === 'list') {
    return withCatalog(config, io, (catalog) => {
      io.stdout.write('name\tadmin\ttokens\tcreated\n');
      for (const u of catalog.users.list())
        io.stdout.write(
          `${u.name}\t${u.admin ? 'yes' : 'no'}\t${u.liveTokens}\t${new Date(u.createdAt).toISOString()}\n`,
        );
    });
  }
  return usage(io, 'preservd user add NAME [--admin] | preservd user list');
}

export async function runToken(argv: string[], io: CommandIO, config: Config): Promise<number> {
  const [verb, arg] = argv;
  if (verb === 'issue' && arg !== undefined) {
    return withCatalog(config, io, (catalog) => {
      const token = catalog.users.issueToken(arg);
      io.stdout.write(`issued token ${token.id} for ${arg} (shown once, keep it safe):\n${token.secret}\n`);
    });
  }
  if (verb === 'revoke' && arg !== undefined) {
    return withCatalog(config, io, (catalog) => {
      if (!catalog.users.revokeToken(arg)) throw new Error(`no live token with id ${arg}`);
      io.stdout.write(`revoked token ${arg}\n`);
    });
  }
  return usage(io, 'preservd token issue NAME | preservd token revoke TOKEN_ID');
}

export async function withCatalog(
  config: Config,
  io: CommandIO,
  fn: (catalog: Catalog, layout: DataLayout) => void | Promise<void>,
): Promise<number> {
  let catalog: Catalog | undefined;
  try {
    const layout = new DataLayout(config.dataDir);
    catalog = Catalog.open(layout);
    await fn(catalog, layout);
    return 0;
  } catch (err) {
    io.stderr.write(`preservd: ${(err as Error).message}\n`);
    return 1;
  } finally {
    await catalog?.close();
  }
}

export function usage(io: CommandIO, text: string): number {
  io.stderr.write(`usage: ${text}\n`);
  return 2;
}
