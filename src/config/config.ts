/**
 * The configuration: embedded defaults, an optional JSON file (`PRESERVD_CONFIG`), then
 * environment overrides (CLI.md). Checked once at load against its schema (schema.ts); every
 * problem is reported together with the key it concerns, so an operator fixes the file in one go.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkConfig } from './check.js';
import type { Config } from './schema.js';

export type { Config, ContentTypeConfig } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/** The package's own folder (two levels above dist/src/config or src/config). */
const packageRoot = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    try {
      readFileSync(resolve(dir, 'package.json'));
      return dir;
    } catch {
      dir = dirname(dir);
    }
  }
  return process.cwd();
})();

/** Every key at its default: what an empty configuration file means. */
export function defaults(): Config {
  const config: Record<string, unknown> = {};
  checkConfig(config);
  return config as Config;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const ENV: Array<[string, string[], 'string' | 'port']> = [
  ['PRESERVD_DATA_DIR', ['dataDir'], 'string'],
  ['PRESERVD_HTTP_HOST', ['http', 'host'], 'string'],
  ['PRESERVD_HTTP_PORT', ['http', 'port'], 'port'],
  ['PRESERVD_RSYNC_PORT', ['upload', 'rsync', 'port'], 'port'],
  ['PRESERVD_LOG_LEVEL', ['logLevel'], 'string'],
  ['PRESERVD_LOG_FORMAT', ['logFormat'], 'string'],
];

/**
 * Loads the configuration. `env` and `file` are parameters so tests need not touch the process.
 * Relative paths (dataDir, profiles) are resolved against the working directory for dataDir
 * (so `npm start` keeps everything under ./var) and against the config file for profiles.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const problems: string[] = [];
  const file = env.PRESERVD_CONFIG ?? resolve(packageRoot, 'config/default.json');
  let fromFile: Record<string, Json> = {};
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (!isObject(parsed)) problems.push(`${file}: the configuration must be a JSON object`);
    else fromFile = parsed;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT' && env.PRESERVD_CONFIG === undefined) fromFile = {};
    else problems.push(`${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
  // The environment over the file; the defaults fill in what neither says (checkConfig).
  for (const [name, path, kind] of ENV) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    let target: Json | undefined = fromFile;
    for (const key of path.slice(0, -1)) target = isObject(target) ? (target[key] ??= {}) : undefined;
    if (!isObject(target)) continue; // a section that is not an object: checkConfig says so
    if (kind === 'port') {
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 0 || n > 65535) problems.push(`${name}: "${raw}" is not a port number`);
      else target[path.at(-1)!] = n;
    } else target[path.at(-1)!] = raw;
  }
  problems.push(...checkConfig(fromFile));
  if (problems.length > 0) throw new ConfigError(problems);
  const config = fromFile as unknown as Config;
  config.dataDir = resolve(cwd, config.dataDir);
  for (const replica of config.replicas)
    if (replica.kind === 'dir') replica.path = resolve(cwd, replica.path);
  const configDir = dirname(file);
  for (const rules of Object.values(config.contentTypes)) {
    if (rules.profile !== undefined && !isAbsolute(rules.profile)) {
      const besideConfig = resolve(configDir, rules.profile);
      rules.profile = besideConfig;
    }
  }
  return config;
}
