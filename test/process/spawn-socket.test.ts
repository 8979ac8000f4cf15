/**
 * A child whose stdin is a network connection (the rsync preservd starts per connection) runs
 * no shell start-up file: bash, which `spawnIsolated` execs through, takes a socket on stdin for
 * a remote shell and would run ~/.bashrc, which then reads from the client and may hang or
 * run anything the daemon user's profile runs.
 */
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { childEnv, spawnIsolated } from '../../src/process/spawn.js';

t.test('a child with a socket on stdin reads no ~/.bashrc', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'preservd-home-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const marker = join(home, 'bashrc-ran');
  writeFileSync(join(home, '.bashrc'), `touch ${marker}\n`);
  const server = net.createServer({ pauseOnConnect: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  t.teardown(() => client.destroy());
  const [socket] = (await once(server, 'connection')) as [net.Socket];
  const child = spawnIsolated('sh', ['-c', 'echo served'], {
    env: childEnv({ HOME: home }),
    stdio: [socket, socket, 'ignore'],
  });
  socket.destroy();
  let answer = '';
  client.setEncoding('utf8').on('data', (text: string) => (answer += text));
  const ended = once(client, 'end');
  const [code] = await once(child, 'exit');
  t.equal(code, 0);
  await ended;
  t.equal(answer, 'served\n', 'the child talks to the client over the handed-over socket');
  t.notOk(existsSync(marker), '~/.bashrc was not run');
});
