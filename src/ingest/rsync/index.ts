/** The rsync daemon that receives uploads, its configuration and hooks, and its transfer records. */
export { rsyncGreets } from './probe.js';
export { RsyncDaemon, type RestartInfo, type RsyncDaemonEvents, type RsyncDaemonOptions } from './daemon.js';
export { hookCommands, HOOK_SOURCES, rsyncdConfig, shellQuote } from './config.js';
export { latestPendingTransfer, parseTransferRecord, TransferLog, type Transfer, type TransferListener } from './transfer-log.js';
