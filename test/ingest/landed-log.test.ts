/**
 * The per-connection logs of received files: what rsyncd.conf asks rsync to write, and how a line
 * is read back (rsync's `\#ooo` escapes, directories and attribute-only lines skipped, a path
 * that is not plainly inside an upload refused).
 */
import t from 'tap';
import { newCapability } from '../../src/ingest/capability.js';
import { parseLandedLine, rsyncdConfig } from '../../src/ingest/rsync/index.js';
import { DataLayout } from '../../src/storage/layout.js';

t.test('rsyncd.conf logs every received file to a log per connection', async (t) => {
  const conf = rsyncdConfig({
    layout: new DataLayout('/srv/preservd'),
    module: 'preservd',
    maxConnections: 20,
    timeoutSeconds: 600,
  });
  for (const line of [
    'log file = /srv/preservd/rsyncd/landed/%LANDED_LOG%',
    'transfer logging = yes',
    'log format = landed|%i|%l|%f',
  ])
    t.ok(conf.includes(line), line);
});

t.test('a landed line', async (t) => {
  const cap = newCapability();
  const prefix = '2026/11/26 18:00:48 [25316] ';
  t.same(parseLandedLine(`${prefix}landed|>f+++++++++|3000000|${cap}/data/big.bin`), {
    capability: cap,
    path: 'data/big.bin',
    size: 3000000,
  });
  // Bytes as rsync writes them, read as latin1: a newline, a backslash before '#', UTF-8 é.
  const raw = Buffer.from(`${prefix}landed|>f..t......|1|${cap}/data/a|b\\#012c \\#134#012 é.txt`).toString(
    'latin1',
  );
  t.same(parseLandedLine(raw), { capability: cap, path: 'data/a|b\nc \\#012 é.txt', size: 1 });
  t.equal(parseLandedLine(`${prefix}landed|cd+++++++++|4096|${cap}/data`), undefined, 'a folder');
  t.equal(parseLandedLine(`${prefix}landed|.f..t......|1|${cap}/data/a`), undefined, 'no data received');
  t.equal(parseLandedLine(`${prefix}landed|>f+++++++++|1|not-a-capability/a`), undefined);
  t.equal(parseLandedLine(`${prefix}landed|>f+++++++++|1|${cap}/data/../x`), undefined);
  t.equal(parseLandedLine(`${prefix}rsync to preservd/${cap}/ from localhost`), undefined);
  t.equal(parseLandedLine(`${prefix}landed|>f+++++++++|1|${cap}`), undefined, 'no path in the upload');
});
