/** The rsync side that receives uploads (an rsync per connection), its configuration and hooks, and its transfer records. */
export { rsyncGreets } from './probe.js';
export { RsyncDaemon, type RsyncDaemonOptions } from './daemon.js';
export { hookCommands, HOOK_SOURCES, rsyncdConfig, shellQuote } from './config.js';
export { LandedLog, parseLandedLine, type LandedFile, type LandedListener } from './landed-log.js';
export {
  latestPendingTransfer,
  parseTransferRecord,
  TransferLog,
  type Transfer,
  type TransferListener,
} from './transfer-log.js';
