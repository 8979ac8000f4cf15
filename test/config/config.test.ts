/** Loading the configuration: defaults, the file, environment overrides, and clear errors. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, defaults, loadConfig } from '../../src/config/config.js';

const dir = mkdtempSync(join(tmpdir(), 'preservd-config-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, content: unknown) => {
  const p = join(dir, name);
  writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
  return p;
};

t.test(
  'no file and no environment: the embedded defaults, dataDir under the working directory',
  async (t) => {
    const c = loadConfig({}, '/srv/app');
    t.equal(c.dataDir, '/srv/app/var');
    t.equal(c.http.host, '127.0.0.1');
    t.equal(c.http.port, 8080);
    t.equal(c.upload.rsync.port, 8873);
    t.same(Object.keys(c.contentTypes), ['audio', 'bentleyaudio', 'video', 'digital', 'video_game']);
  },
);

t.test('an empty object is a valid file', async (t) => {
  const c = loadConfig({ PRESERVD_CONFIG: file('empty.json', {}) }, '/x');
  t.same({ ...c, dataDir: './var' }, defaults());
});

t.test('the file is merged over the defaults; the environment over the file', async (t) => {
  const p = file('some.json', {
    http: { port: 9000 },
    upload: { quietMs: 50 },
    contentTypes: { maps: { profile: 'profiles/maps.json' } },
  });
  const c = loadConfig(
    {
      PRESERVD_CONFIG: p,
      PRESERVD_HTTP_PORT: '9100',
      PRESERVD_RSYNC_PORT: '9101',
      PRESERVD_DATA_DIR: '/data/p',
      PRESERVD_HTTP_HOST: '0.0.0.0',
    },
    '/x',
  );
  t.equal(c.http.port, 9100);
  t.equal(c.http.host, '0.0.0.0');
  t.equal(c.http.bodyLimit, 64 * 1024, 'untouched keys keep their defaults');
  t.equal(c.upload.rsync.port, 9101);
  t.equal(c.upload.rsync.module, 'preservd');
  t.equal(c.upload.quietMs, 50);
  t.equal(c.dataDir, '/data/p');
  t.same(Object.keys(c.contentTypes), ['maps'], 'contentTypes replaces the default map');
  t.equal(
    c.contentTypes.maps!.profile,
    join(dir, 'profiles/maps.json'),
    'profiles are relative to the config file',
  );
});

t.test('every problem is reported at once, each with its key', async (t) => {
  const p = file('bad.json', {
    http: { port: 70000, bodyLimit: 'big' },
    upload: { rsync: { module: 'no spaces please' } },
    audit: { algorithms: 'some', webhookUrl: 'ftp://x' },
    contentTypes: { audio: { validator: 'rm -rf /' } },
  });
  const err = t.throws(() =>
    loadConfig({ PRESERVD_CONFIG: p, PRESERVD_RSYNC_PORT: 'eighty' }, '/x'),
  ) as ConfigError;
  t.ok(err instanceof ConfigError);
  for (const key of [
    'http.port',
    'http.bodyLimit',
    'upload.rsync.module',
    'audit.algorithms',
    'audit.webhookUrl',
    'contentTypes.audio.validator',
    'PRESERVD_RSYNC_PORT',
  ]) {
    t.ok(
      err.problems.some((p) => p.startsWith(key)),
      `names ${key}`,
    );
  }
});

t.test('the rsync port cannot be 0: the upload link must name a real port', async (t) => {
  t.throws(() => loadConfig({ PRESERVD_RSYNC_PORT: '0' }, '/x'), /upload\.rsync\.port/);
  t.equal(
    loadConfig({ PRESERVD_HTTP_PORT: '0' }, '/x').http.port,
    0,
    'while the HTTP port may be chosen by the system',
  );
});

t.test('unreadable or malformed files are errors, not silently ignored', async (t) => {
  t.throws(() => loadConfig({ PRESERVD_CONFIG: join(dir, 'missing.json') }), /no such file/);
  t.throws(() => loadConfig({ PRESERVD_CONFIG: file('broken.json', '{"http": ') }), ConfigError);
  t.throws(() => loadConfig({ PRESERVD_CONFIG: file('array.json', '[1]') }), /must be a JSON object/);
});

t.test('rsync off requires a link template', async (t) => {
  t.throws(
    () => loadConfig({ PRESERVD_CONFIG: file('norsync.json', { upload: { rsync: { enabled: false } } }) }),
    /linkTemplate/,
  );
  const c = loadConfig({
    PRESERVD_CONFIG: file('ssh.json', {
      upload: { rsync: { enabled: false }, linkTemplate: 'up@host:landing/{capability}/' },
    }),
  });
  t.equal(c.upload.linkTemplate, 'up@host:landing/{capability}/');
});

t.test('replicas: defaults filled in, relative folders resolved, every mistake named', async (t) => {
  const ok = loadConfig(
    {
      PRESERVD_CONFIG: file(
        'replicas.json',
        JSON.stringify({
          replicas: [
            { name: 'ceph', kind: 's3', endpoint: 'http://127.0.0.1:7480', bucket: 'b' },
            { name: 'mirror', kind: 'dir', path: 'second' },
          ],
          audit: { repair: 'auto' },
        }),
      ),
    },
    '/srv',
  );
  t.same(ok.replicas, [
    {
      region: 'us-east-1',
      prefix: '',
      forcePathStyle: true,
      name: 'ceph',
      kind: 's3',
      endpoint: 'http://127.0.0.1:7480',
      bucket: 'b',
    },
    { name: 'mirror', kind: 'dir', path: '/srv/second' },
  ]);
  t.equal(ok.audit.repair, 'auto');
  const err = t.throws(() =>
    loadConfig({
      PRESERVD_CONFIG: file(
        'bad-replicas.json',
        JSON.stringify({
          replicas: [
            {
              name: 'Ceph!',
              kind: 's3',
              endpoint: 'ftp://x',
              bucket: '',
              retention: { mode: 'FOREVER', days: 0 },
            },
            { name: 'mirror', kind: 'dir' },
            { name: 'mirror', kind: 'tape' },
            { name: 'primary', kind: 'dir', path: '/x' },
          ],
          audit: { repair: 'sometimes' },
        }),
      ),
    }),
  ) as ConfigError;
  t.same(err.problems, [
    'audit.repair: must be "off" or "auto"',
    'replicas[0].name: must be 1 to 32 of a-z, 0-9 and -',
    'replicas[0].bucket: must be a non-empty string',
    'replicas[0].endpoint: must be an http(s) URL',
    'replicas[0].retention.mode: must be "COMPLIANCE" or "GOVERNANCE"',
    'replicas[0].retention.days: must be an integer from 1 to 36500',
    'replicas[1].path: must be a non-empty string',
    'replicas[2].name: "mirror" is used twice',
    'replicas[2].kind: must be "s3" or "dir"',
    'replicas[3].name: "primary" is reserved for the copy in storage/',
  ]);
});

t.test('a replica caFile must be a readable PEM file', async (t) => {
  const notPem = file('not-a-ca.pem', 'hello\n');
  const pem = file('ca.pem', '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const replica = { kind: 's3', endpoint: 'https://127.0.0.1:7443', bucket: 'b' };
  const err = t.throws(() =>
    loadConfig({
      PRESERVD_CONFIG: file(
        'bad-ca.json',
        JSON.stringify({
          replicas: [
            { ...replica, name: 'a', caFile: '/nonexistent/ca.pem' },
            { ...replica, name: 'b', caFile: notPem },
            { ...replica, name: 'c', caFile: '' },
          ],
        }),
      ),
    }),
  ) as ConfigError;
  t.same(err.problems, [
    "replicas[0].caFile: cannot be read: ENOENT: no such file or directory, open '/nonexistent/ca.pem'",
    `replicas[1].caFile: ${notPem} holds no PEM certificate`,
    'replicas[2].caFile: must be a non-empty string',
  ]);
  const ok = loadConfig({
    PRESERVD_CONFIG: file(
      'good-ca.json',
      JSON.stringify({ replicas: [{ ...replica, name: 'a', caFile: pem }] }),
    ),
  });
  t.match(ok.replicas, [{ name: 'a', caFile: pem }]);
});

t.test('a section of the wrong type is named, even with an environment override into it', async (t) => {
  const err = t.throws(() =>
    loadConfig({
      PRESERVD_CONFIG: file('flat.json', { upload: 'rsync', http: null, replicas: [{ name: 'x' }] }),
      PRESERVD_RSYNC_PORT: '9000',
    }),
  ) as ConfigError;
  t.same(err.problems, [
    'http: must be an object',
    'upload: must be an object',
    'replicas[0].kind: must be "s3" or "dir"',
  ]);
});

t.test('defaults() is what an empty file gives, and is a fresh object each time', async (t) => {
  const a = defaults();
  a.contentTypes.audio!.profile = '/changed';
  a.http.trustedProxies.push('10.0.0.1');
  t.same(defaults().contentTypes.audio, {});
  t.same(defaults().http.trustedProxies, []);
});
