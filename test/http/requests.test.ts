/**
 * The requests/packages API against the real daemon: authentication forms, ownership, create
 * rules (201/303/409/422), list and show shapes, and bad input that must change nothing.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';

const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('requests API', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');
  const carol = d.addUser('carol', true);

  const countPackages = async () => (await d.request('GET', '/v1/requests')).json.length as number;

  await t.test('authentication', async (t) => {
    const none = await d.request('GET', '/v1/requests', { token: null });
    t.equal(none.status, 401);
    t.equal(none.headers.get('www-authenticate'), 'Bearer realm="preservd"');
    t.match(none.json.error, /^authentication required: send "Authorization: Bearer <token>"/);
    const bad = await d.request('GET', '/v1/requests', { token: 'not-a-token' });
    t.equal(bad.status, 401);
    t.equal(bad.headers.get('www-authenticate'), 'Bearer realm="preservd"');
    for (const header of [
      `Bearer ${alice}`,
      `Token token=${alice}`,
      `Token token="${alice}"`,
      `Bearer token=${alice}`,
    ]) {
      const res = await d.request('GET', '/v1/requests', { token: null, headers: { authorization: header } });
      t.equal(res.status, 200, header.replace(alice, 'TOKEN'));
    }
    const post = await d.request('POST', '/v1/requests', {
      token: null,
      json: { bag_id: randomUUID(), external_id: 'x', content_type: 'audio' },
    });
    t.equal(post.status, 401);
    t.equal(await countPackages(), 0, 'nothing created without credentials');
  });

  await t.test('create: 201 with Location and the object', async (t) => {
    const bagId = randomUUID();
    const res = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: bagId.toUpperCase(), external_id: 'ext-1', content_type: 'audio' },
    });
    t.equal(res.status, 201);
    t.equal(res.headers.get('location'), `/v1/requests/${bagId}`);
    t.same(
      Object.keys(res.json),
      [
        'bag_id',
        'user',
        'content_type',
        'external_id',
        'upload_link',
        'stored',
        'files',
        'upload',
        'created_at',
        'updated_at',
      ].filter((k) => k in res.json),
    );
    t.equal(res.json.bag_id, bagId, 'bag_id is lower-case in output');
    t.equal(res.json.user, 'alice');
    t.equal(res.json.content_type, 'audio');
    t.equal(res.json.external_id, 'ext-1');
    t.equal(res.json.stored, false);
    t.same(res.json.files, []);
    t.notOk('storage_location' in res.json, 'no storage_location for a regular user');
    t.match(
      res.json.upload_link,
      new RegExp(`^rsync://127\\.0\\.0\\.1:${d.rsyncPort}/preservd/[0-9a-f]{32}/$`),
    );
    t.match(res.json.created_at, RFC3339_MS);
    t.match(res.json.updated_at, RFC3339_MS);

    const asAdmin = await d.request('GET', `/v1/requests/${bagId}`, { token: carol });
    t.equal(asAdmin.status, 200);
    t.equal(asAdmin.json.storage_location, null, 'admins see storage_location, null until stored');

    const form = await d.request('POST', '/v1/requests', {
      token: alice,
      form: { bag_id: randomUUID(), external_id: 'ext-form', content_type: 'video' },
    });
    t.equal(form.status, 201, 'form-encoded bodies, as chipmunk-client sends');
    t.equal(form.json.external_id, 'ext-form');
  });

  await t.test('create: duplicates answer 303 to the caller, 409 to others', async (t) => {
    const bagId = randomUUID();
    await d.createRequest(alice, { bag_id: bagId, external_id: 'dup-ext' });
    const before = await countPackages();
    const sameId = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: bagId, external_id: 'other', content_type: 'audio' },
    });
    t.equal(sameId.status, 303);
    t.equal(sameId.headers.get('location'), `/v1/requests/${bagId}`);
    const sameExt = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: randomUUID(), external_id: 'dup-ext', content_type: 'audio' },
    });
    t.equal(sameExt.status, 303);
    t.equal(sameExt.headers.get('location'), `/v1/requests/${bagId}`);
    const admin = await d.request('POST', '/v1/requests', {
      token: carol,
      json: { bag_id: bagId, external_id: 'x', content_type: 'audio' },
    });
    t.equal(admin.status, 303, 'an admin may see every package');
    const other = await d.request('POST', '/v1/requests', {
      token: bob,
      json: { bag_id: bagId, external_id: 'bobs', content_type: 'audio' },
    });
    t.equal(other.status, 409);
    t.match(other.json.error, /bag_id/);
    const otherExt = await d.request('POST', '/v1/requests', {
      token: bob,
      json: { bag_id: randomUUID(), external_id: 'dup-ext', content_type: 'audio' },
    });
    t.equal(otherExt.status, 409);
    t.match(otherExt.json.error, /external_id/);
    t.equal(await countPackages(), before, 'nothing created');
  });

  await t.test("create: an external_id equal to another package's bag_id is no duplicate", async (t) => {
    for (const [who, token, answer] of [
      ['bob, who cannot see it', bob, 409],
      ['alice, who owns it', alice, 303],
    ] as const) {
      const taken = randomUUID();
      await d.createRequest(alice, { bag_id: taken, external_id: `owner-of-${taken}` });
      const bagId = randomUUID();
      const res = await d.request('POST', '/v1/requests', {
        token,
        json: { bag_id: bagId, external_id: taken, content_type: 'audio' },
      });
      t.equal(res.status, 201, `${who}: created (was ${answer}, as if it were that package)`);
      t.equal(res.json.bag_id, bagId);
      t.equal(res.json.external_id, taken);
      const again = await d.request('POST', '/v1/requests', {
        token,
        json: { bag_id: randomUUID(), external_id: taken, content_type: 'audio' },
      });
      t.equal(again.status, 303, `${who}: the same external_id again is the new package`);
      t.equal(again.headers.get('location'), `/v1/requests/${bagId}`);
    }
  });

  await t.test('create: 422 names every bad field and creates nothing', async (t) => {
    const before = await countPackages();
    const cases: Array<[unknown, string[]]> = [
      [{}, ['bag_id', 'content_type', 'external_id']],
      [{ bag_id: 'not-a-uuid', external_id: 'e', content_type: 'audio' }, ['bag_id']],
      [{ bag_id: randomUUID(), external_id: '', content_type: 'audio' }, ['external_id']],
      [{ bag_id: randomUUID(), external_id: 'e', content_type: 'spreadsheet' }, ['content_type']],
      [{ bag_id: 42, external_id: ['e'], content_type: true }, ['bag_id', 'content_type', 'external_id']],
      [{ bag_id: randomUUID(), external_id: 'e\nf', content_type: 'audio' }, ['external_id']],
      // A validator gets it as an argument: "--version" would be an option (probe, finding 18).
      [{ bag_id: randomUUID(), external_id: '--version', content_type: 'audio' }, ['external_id']],
      // 1024 characters, 3072 bytes: too long a catalog key (was a 500).
      [{ bag_id: randomUUID(), external_id: '€'.repeat(1024), content_type: 'audio' }, ['external_id']],
      [[1, 2], ['body']],
    ];
    for (const [body, fields] of cases) {
      const res = await d.request('POST', '/v1/requests', { token: alice, json: body });
      t.equal(res.status, 422, JSON.stringify(body));
      t.same(Object.keys(res.json.fields).sort(), fields, `fields of ${JSON.stringify(body)}`);
      t.match(res.json.error, /^invalid request: /);
      t.ok(
        fields.every((field) => res.json.error.includes(`${field} `)),
        `the sentence names every field: ${res.json.error}`,
      );
    }
    // The example of docs/errors.md, word for word, and each problem in words.
    const documented = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: 'nope', content_type: 'audio' },
    });
    t.same(documented.json, {
      error: 'invalid request: bag_id must be a UUID; external_id is required',
      fields: { bag_id: ['must be a UUID'], external_id: ['is required'] },
    });
    const words = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: 7, content_type: ' ', external_id: '-a/b', user: false },
    });
    t.same(words.json.fields, {
      bag_id: ['must be a string'],
      content_type: ['must not be empty'],
      external_id: ['must not contain control characters or slashes', 'must not begin with "-"'],
      user: ['must be a string'],
    });
    const notAnObject = await d.request('POST', '/v1/requests', { token: alice, json: 'bag' });
    t.same(notAnObject.json.fields, {
      body: ['must be an object with bag_id, content_type and external_id'],
    });
    const tooLong = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: randomUUID(), external_id: 'é'.repeat(513), content_type: 'audio' },
    });
    t.same(
      tooLong.json.fields,
      { external_id: ['must be at most 1024 bytes in UTF-8'] },
      '1026 bytes in 513 characters',
    );
    const unknownUser = await d.request('POST', '/v1/requests', {
      token: carol,
      json: { bag_id: randomUUID(), external_id: 'u', content_type: 'audio', user: 'nobody' },
    });
    t.equal(unknownUser.status, 422);
    t.same(Object.keys(unknownUser.json.fields), ['user']);
    t.equal(await countPackages(), before);
  });

  await t.test('create: admins choose the owner; regular users cannot', async (t) => {
    const forBob = await d.request('POST', '/v1/requests', {
      token: carol,
      json: { bag_id: randomUUID(), external_id: 'for-bob', content_type: 'audio', user: 'bob' },
    });
    t.equal(forBob.status, 201);
    t.equal(forBob.json.user, 'bob');
    const sneaky = await d.request('POST', '/v1/requests', {
      token: alice,
      json: { bag_id: randomUUID(), external_id: 'sneaky', content_type: 'audio', user: 'bob' },
    });
    t.equal(sneaky.status, 201);
    t.equal(sneaky.json.user, 'alice', 'user is ignored for regular users');
  });

  await t.test('list and show: ownership, files only in single items, three names', async (t) => {
    const bagId = randomUUID();
    await d.createRequest(bob, { bag_id: bagId, external_id: 'bob-ext' });
    for (const prefix of ['/v1/requests', '/v1/packages', '/v1/bags']) {
      const mine = await d.request('GET', prefix, { token: bob });
      t.equal(mine.status, 200);
      t.ok(
        mine.json.every((p: any) => p.user === 'bob'),
        `${prefix}: bob sees only his`,
      );
      t.ok(
        mine.json.every((p: any) => !('files' in p) && !('storage_location' in p)),
        `${prefix}: no files in lists`,
      );
      const all = await d.request('GET', prefix, { token: carol });
      t.ok(
        all.json.some((p: any) => p.user === 'alice') && all.json.some((p: any) => p.user === 'bob'),
        `${prefix}: admins see all`,
      );
      t.ok(
        all.json.every((p: any) => 'storage_location' in p),
        `${prefix}: admins get storage_location`,
      );
      const created = all.json.map((p: any) => p.created_at);
      t.same(created, [...created].sort(), `${prefix}: oldest first`);

      const show = await d.request('GET', `${prefix}/${bagId}`, { token: bob });
      t.equal(show.status, 200);
      t.same(show.json.files, []);
      const byExternal = await d.request('GET', `${prefix}/bob-ext`, { token: bob });
      t.equal(byExternal.status, 200, `${prefix}: external_id in place of bag_id`);
      t.equal(byExternal.json.bag_id, bagId);
      t.equal(
        (await d.request('GET', `${prefix}/${bagId}`, { token: alice })).status,
        403,
        `${prefix}: another user's → 403`,
      );
      t.equal(
        (await d.request('GET', `${prefix}/${randomUUID()}`, { token: alice })).status,
        404,
        `${prefix}: unknown → 404`,
      );
      t.equal((await d.request('GET', `${prefix}/no-such-external-id`, { token: alice })).status, 404);
    }
  });

  await t.test('bad input: clear errors, no crash, nothing written', async (t) => {
    const before = await countPackages();
    const malformed = await d.request('POST', '/v1/requests', {
      token: alice,
      body: '{"bag_id": ',
      headers: { 'content-type': 'application/json' },
    });
    t.equal(malformed.status, 400);
    t.match(malformed.json.error, /JSON/);
    const huge = await d.request('POST', '/v1/requests', {
      token: alice,
      body: JSON.stringify({ bag_id: randomUUID(), external_id: 'x'.repeat(1 << 20), content_type: 'audio' }),
      headers: { 'content-type': 'application/json' },
    });
    t.equal(huge.status, 413);
    t.match(huge.json.error, /body is too large/);
    const xml = await d.request('POST', '/v1/requests', {
      token: alice,
      body: '<bag/>',
      headers: { 'content-type': 'application/xml' },
    });
    t.equal(xml.status, 415);
    const route = await d.request('GET', '/v1/nothing-here', { token: alice });
    t.equal(route.status, 404);
    t.match(route.json.error, /no such route/);
    const method = await d.request('DELETE', '/v1/requests', { token: alice });
    t.equal(method.status, 404);
    t.equal(method.json.error, 'no such route: DELETE /v1/requests');
    const badId = await d.request('GET', '/v1/queue/abc', { token: alice });
    t.equal(badId.status, 400);
    const unauthUnknown = await d.request('GET', '/nothing', { token: null });
    t.equal(unauthUnknown.status, 404);
    t.equal(await countPackages(), before);
    t.equal((await d.request('GET', '/v1/requests', { token: alice })).status, 200, 'still serving');
  });

  await t.test('tokens: issue and revoke with the CLI', async (t) => {
    const issued = d.cli(['token', 'issue', 'alice']);
    t.equal(issued.code, 0);
    const second = issued.stdout.trim().split('\n').at(-1)!;
    t.equal((await d.request('GET', '/v1/requests', { token: second })).status, 200);
    const id = /token ([0-9a-f]{16})/.exec(issued.stdout)![1]!;
    t.equal(d.cli(['token', 'revoke', id]).code, 0);
    t.equal((await d.request('GET', '/v1/requests', { token: second })).status, 401, 'revoked token refused');
    t.equal(
      (await d.request('GET', '/v1/requests', { token: alice })).status,
      200,
      'other tokens still work',
    );
    t.equal(d.cli(['token', 'revoke', id]).code, 1, 'revoking twice fails');
    const list = d.cli(['user', 'list']);
    t.match(list.stdout, /alice\tno\t1\t/);
    t.match(list.stdout, /carol\tyes\t1\t/);
    t.match(list.stdout, /admin\tyes\t1\t/);
    const dup = d.cli(['user', 'add', 'alice']);
    t.equal(dup.code, 1);
    t.match(dup.stderr, /already exists/);
    t.equal(d.cli(['user', 'add', 'Bad Name!']).code, 1);
  });

  await t.test('the first admin token works and is private', async (t) => {
    const { statSync } = await import('node:fs');
    const mode = statSync(`${d.dataDir}/admin.token`).mode & 0o777;
    t.equal(mode, 0o600);
    t.equal((await d.request('GET', '/v1/requests')).status, 200);
  });
});
