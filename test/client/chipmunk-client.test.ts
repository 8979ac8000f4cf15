/**
 * chipmunk-client's upload and status workflow, byte for byte as the Ruby client speaks it, against
 * the real daemon (mlibrary/chipmunk-client: lib/chipmunk/uploader.rb, bag_rsyncer.rb, status_cli.rb;
 * client.rb as described in shared/research/chipmunk.md §10):
 *
 *   POST /v1/requests (form: external_id, content_type, bag_id from chipmunk-info.txt)
 *     201 → GET Location; 303 → GET Location (rest-client follows a 303 with a GET)
 *   stored? skip. external_id differs? skip. Else rsync to upload_link:
 *     rsync -rtvzP --delete --no-group --perms --chmod=ug=rwX,o= <bag>/ <upload_link>
 *   POST /v1/requests/<bag_id>/complete (no params) → 201 → GET /v1/queue/<id>, or 303
 *   poll GET /v1/queue/<id> while PENDING; DONE → "uploaded successfully", else print `error`
 *   ingest_status: GET /v1/bags/<id> (stored?), else GET /v1/queue?package=<id>
 *
 * Every request carries `Authorization: Token token=<key>` and rest-client's Accept and
 * User-Agent; bodies are application/x-www-form-urlencoded. Plain fetch, no JSON helper.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';

/** The flags of BagRsyncer#upload (chipmunk-client lib/chipmunk/bag_rsyncer.rb). */
const CLIENT_RSYNC_FLAGS = ['-rtvzP', '--delete', '--no-group', '--perms', '--chmod=ug=rwX,o='];

interface Exchange {
  method: string;
  path: string;
  status: number;
  location: string | null;
}

/** Chipmunk::Client: rest-client with a token header, following 201 and 303 to their Location. */
class ChipmunkClient {
  readonly log: Exchange[] = [];

  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  private headers(): Record<string, string> {
    return {
      authorization: `Token token=${this.apiKey}`,
      accept: '*/*',
      'user-agent': 'rest-client/2.1.0 (linux x86_64) ruby/3.1.4p223',
      'accept-encoding': 'gzip, deflate',
    };
  }

  private async send(method: string, url: URL, body?: URLSearchParams): Promise<any> {
    const headers = this.headers();
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(url, { method, headers, body: body?.toString() ?? null, redirect: 'manual' });
    const text = await res.text();
    this.log.push({
      method,
      path: url.pathname + url.search,
      status: res.status,
      location: res.headers.get('location'),
    });
    if (res.status === 201 || res.status === 303) {
      const location = res.headers.get('location');
      if (location === null) throw new Error(`${method} ${url.pathname}: ${res.status} without Location`);
      return this.send('GET', new URL(location, url));
    }
    if (res.status < 200 || res.status > 299)
      throw new Error(`${method} ${url.pathname}: ${res.status} ${text}`);
    if (!/^application\/json/.test(res.headers.get('content-type') ?? ''))
      throw new Error(`${method} ${url.pathname}: not JSON`);
    return JSON.parse(text);
  }

  get(path: string): Promise<any> {
    return this.send('GET', new URL(path, this.baseUrl));
  }

  /** rest-client posts a params hash as a form; `complete` posts none (an empty form). */
  post(path: string, params: Record<string, string> = {}): Promise<any> {
    return this.send('POST', new URL(path, this.baseUrl), new URLSearchParams(params));
  }
}

/** Chipmunk::Uploader#upload_without_waiting_for_result and #print_result_when_done. */
async function upload(
  client: ChipmunkClient,
  bagDir: string,
  tags: { bag_id: string; external_id: string; content_type: string },
) {
  const printed: string[] = [];
  const request = await client.post('/v1/requests', {
    external_id: tags.external_id,
    content_type: tags.content_type,
    bag_id: tags.bag_id,
  });
  if (request.stored) {
    printed.push(`Bag for ${request.external_id} has already been uploaded`);
    return { request, printed };
  }
  if (request.external_id !== tags.external_id) {
    printed.push(
      `Server expected a bag with external ID "${request.external_id}" but the provided bag has external ID "${tags.external_id}"`,
    );
    return { request, printed };
  }
  const rsync = spawnSync('rsync', [...CLIENT_RSYNC_FLAGS, `${bagDir}/`, request.upload_link], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (rsync.status !== 0) throw new Error(`rsync failed: ${rsync.stdout}${rsync.stderr}`);
  let item = await client.post(`/v1/requests/${tags.bag_id}/complete`);
  const deadline = Date.now() + 15_000;
  while (item.status === 'PENDING') {
    if (Date.now() > deadline) throw new Error(`still PENDING: ${JSON.stringify(item)}`);
    await new Promise((r) => setTimeout(r, 50)); // the client sleeps 5 s
    item = await client.get(`/v1/queue/${item.id}`);
  }
  if (item.status === 'DONE') printed.push(`${tags.external_id} uploaded successfully`);
  else printed.push(`${tags.external_id} upload failure`, item.error);
  return { request, item, printed };
}

/** A bag as chipmunk's bagger leaves it: BagIt 0.97, md5 and sha1 manifests, chipmunk-info.txt. */
async function chipmunkBag(
  dir: string,
  tags: { bag_id: string; external_id: string; content_type: string },
  files: Record<string, string | Buffer>,
  corrupt: string[] = [],
) {
  return makeBag(dir, {
    files,
    version: '0.97',
    algorithms: ['md5', 'sha1'],
    bagInfo: { 'Bag-Software-Agent': 'BagIt Ruby Gem (http://bagit.rubyforge.org)' },
    chipmunkInfo: { externalId: tags.external_id, bagId: tags.bag_id, contentType: tags.content_type },
    corrupt,
  });
}

t.test('chipmunk-client against preservd', async (t) => {
  const d = await TestDaemon.start(t);
  const key = d.addUser('chipmunk');
  const client = new ChipmunkClient(`${d.url}/`, key);

  await t.test('bin/upload: request, rsync, complete, wait until DONE', async (t) => {
    const tags = {
      bag_id: randomUUID(),
      external_id: `39015${randomBytes(4).toString('hex')}`,
      content_type: 'digital',
    };
    const bagDir = await chipmunkBag(join(t.testdir(), 'bag'), tags, {
      samplefile: 'Hello Bag!\n',
      'sub/scan 1.tif': randomBytes(50_000),
    });

    const { request, item, printed } = await upload(client, bagDir, tags);
    t.same(printed, [`${tags.external_id} uploaded successfully`]);
    t.same(
      client.log.slice(0, 2).map((e) => [e.method, e.status, e.location]),
      [
        ['POST', 201, `/v1/requests/${tags.bag_id}`],
        ['GET', 200, null],
      ],
      'POST /v1/requests: 201, then the client GETs the Location',
    );
    t.equal(request.bag_id, tags.bag_id);
    t.equal(request.stored, false);
    t.match(request.upload_link, /^rsync:\/\//);
    const complete = client.log.find((e) => e.method === 'POST' && e.path.endsWith('/complete'))!;
    t.equal(complete.status, 201);
    t.match(complete.location, /^\/v1\/queue\/\d+$/);
    t.equal(item.status, 'DONE');
    t.equal(item.package, `/v1/packages/${tags.bag_id}`);

    await t.test(
      'bin/ingest_status by external id and by bag id: GET /v1/bags/<id> (deprecated)',
      async (t) => {
        for (const id of [tags.external_id, tags.bag_id]) {
          const bag = await client.get(`/v1/bags/${encodeURIComponent(id)}`);
          t.equal(bag.stored, true, `${id}: done`);
          t.equal(bag.bag_id, tags.bag_id);
          t.same(bag.files, ['samplefile', 'sub/scan 1.tif']);
          const queue = await client.get(`/v1/queue?package=${encodeURIComponent(id)}`);
          t.same(
            queue.map((q: { status: string }) => q.status),
            ['DONE'],
            `${id}: its queue items`,
          );
        }
      },
    );

    await t.test('GET /v1/packages/<bag_id>', async (t) => {
      const pkg = await client.get(`/v1/packages/${tags.bag_id}`);
      t.equal(pkg.stored, true);
      t.equal(pkg.external_id, tags.external_id);
      t.equal(pkg.content_type, 'digital');
      t.equal(pkg.user, 'chipmunk');
      t.notOk('storage_location' in pkg, 'not shown to a regular user');
    });

    await t.test('re-running the upload: 303 to the stored package, nothing sent', async (t) => {
      const before = client.log.length;
      const again = await upload(client, bagDir, tags);
      t.same(again.printed, [`Bag for ${tags.external_id} has already been uploaded`]);
      t.same(
        client.log.slice(before).map((e) => [e.method, e.status, e.location]),
        [
          ['POST', 303, `/v1/requests/${tags.bag_id}`],
          ['GET', 200, null],
        ],
      );
      const queue = await client.get(`/v1/queue?package=${tags.bag_id}`);
      t.equal(queue.length, 1, 'no second ingest');
    });
  });

  await t.test('a failed upload, fixed and uploaded again', async (t) => {
    const tags = {
      bag_id: randomUUID(),
      external_id: `39015${randomBytes(4).toString('hex')}`,
      content_type: 'digital',
    };
    const good = randomBytes(20_000);
    const bagDir = await chipmunkBag(join(t.testdir(), 'bag'), tags, { 'a.wav': good, 'b.txt': 'fine\n' }, [
      'data/a.wav',
    ]);

    const first = await upload(client, bagDir, tags);
    t.equal(first.item.status, 'FAILED');
    t.equal(first.printed[0], `${tags.external_id} upload failure`);
    t.match(first.printed[1], /a\.wav/, 'the error names the bad file');
    t.notMatch(first.printed[1], /\/tmp\/|preservd-test-/, 'and no server path');

    await writeFile(join(bagDir, 'data/a.wav'), good); // the operator fixes the bag
    const before = client.log.length;
    const second = await upload(client, bagDir, tags);
    t.same(second.printed, [`${tags.external_id} uploaded successfully`]);
    const exchanges = client.log.slice(before);
    t.same(
      exchanges.slice(0, 2).map((e) => [e.method, e.status]),
      [
        ['POST', 303],
        ['GET', 200],
      ],
      'the request exists: 303 to it',
    );
    t.equal(
      exchanges.find((e) => e.path.endsWith('/complete'))?.status,
      201,
      'a FAILED item does not block a new attempt',
    );
    const queue = await client.get(`/v1/queue?package=${tags.external_id}`);
    t.same(
      queue.map((q: { status: string }) => q.status),
      ['FAILED', 'DONE'],
    );
  });
});
