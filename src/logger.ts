/**
 * The daemon's log, and the one `Logger` shape every module takes (pino satisfies it; tests pass
 * `silentLogger` or a recorder). The log is JSON lines (pino) for journald and files, and the same records made readable
 * (pino-pretty) when stdout is a terminal, as with `npm start`. `logFormat` in the configuration
 * overrides the choice.
 */
import { pino, type Logger as PinoLogger } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config/config.js';

/** What modules log through: structured fields first, then the message. */
export interface Logger {
  debug(fields: object, message?: string): void;
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Fields never logged in full, whatever a caller passes. */
const REDACT = ['req.headers.authorization', 'headers.authorization', 'token', 'secret'];

export function createLogger(
  config: Pick<Config, 'logLevel' | 'logFormat'>,
  stdout: { isTTY?: boolean } = process.stdout,
): PinoLogger {
  const options = { level: config.logLevel, redact: REDACT };
  const readable = config.logFormat === 'pretty' || (config.logFormat === 'auto' && stdout.isTTY === true);
  if (!readable) return pino(options);
  // Synchronous, in this thread: a crash must not lose the lines before it.
  return pino(
    options,
    pretty({
      sync: true,
      colorize: stdout.isTTY === true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
    }),
  );
}
