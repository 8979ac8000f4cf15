/**
 * The daemon's log: JSON lines (pino) on stdout; every request line carries the request id and
 * the route template; no token ever appears in it, whether sent as chipmunk-client's
 * `Authorization: Token token=...`, in the query string, in a form or JSON body, or printed by
 * `preservd user add` / `token issue` (which show it once, to the operator, not to the log).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import t from 'tap';
import { redactUrl } from '../../src/http/request-log.js';
import { TestDaemon } from '../helpers/daemon.js';

interface LogLine {
  level: number;
  msg?: string;
  reqId?: string;
  req?: { method: string; route: string; url: string };
  res?: { statusCode: number; method: string; route: string };
}

t.test('redactUrl blanks credential-like query parameters only', async (t) => {
  t.equal(redactUrl('/v1/requests'), '/v1/requests');
  t.equal(redactUrl('/v1/queue?package=abc'), '/v1/queue?package=abc');
  t.equal(redactUrl('/v1/x?a=1&token=s3cret&b=2'), '/v1/x?a=1&token=[Redacted]&b=2');
  t.equal(
    redactUrl('/v1/x?TOKEN=s3cret&access_token=s3cret&api_key=s3cret'),
    '/v1/x?TOKEN=[Redacted]&access_token=[Redacted]&api_key=[Redacted]',
  );
  t.equal(redactUrl('/v1/x?to%6Ben=s3cret'), '/v1/x?to%6Ben=[Redacted]', 'a percent-encoded key');
  t.equal(redactUrl('/v1/x?token'), '/v1/x?token', 'no value, nothing to hide');
  t.equal(
    redactUrl('/v1/x?%E0%A4%A=1&token=s3cret'),
    '/v1/x?%E0%A4%A=1&token=[Redacted]',
    'a malformed escape elsewhere',
  );
});

t.test('the request log', async (t) => {
  const d = await TestDaemon.start(t, { config: { logLevel: 'info' } });
  let stdout = '';
  d.proc.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));

  // Tokens as the CLI shows them: once, on the last line, to the operator.
  const added = d.cli(['user', 'add', 'chip']);
  t.equal(added.code, 0);
  const chip = added.stdout.trim().split('\n').at(-1)!;
  t.match(chip, /^\S{40,}$/, 'the token is the last line of `user add`');
  t.equal(added.stdout.split(chip).length - 1, 1, '`user add` shows the token once');
  const issued = d.cli(['token', 'issue', 'chip']);
  t.equal(issued.code, 0);
  const second = issued.stdout.trim().split('\n').at(-1)!;
  t.not(second, chip);
  t.equal(issued.stdout.split(second).length - 1, 1, '`token issue` shows the token once');
  const admin = d.adminToken;
  const notAToken = `guess-${randomBytes(24).toString('hex')}`;

  const bagId = randomUUID();
  const sent: Array<{ what: string; status: number; route: string }> = [];
  const send = async (
    what: string,
    route: string,
    method: string,
    path: string,
    options: Parameters<TestDaemon['request']>[2],
  ) => {
    const res = await d.request(method, path, { token: null, ...options });
    sent.push({ what, status: res.status, route });
    return res;
  };
  const chipHeader = { authorization: `Token token=${chip}` };
  await send('chipmunk header', '/v1/requests', 'GET', '/v1/requests', { headers: chipHeader });
  await send('quoted chipmunk header', '/v1/requests/:bag_id', 'GET', `/v1/requests/${bagId}`, {
    headers: { authorization: `Token token="${second}"` },
  });
  await send('query token', '/v1/requests', 'GET', `/v1/requests?token=${chip}&access_token=${second}`, {
    headers: chipHeader,
  });
  await send('query token, unauthenticated', '/v1/packages', 'GET', `/v1/packages?token=${chip}`, {});
  await send('query token, no route', 'unmatched', 'GET', `/v1/nothing-here?api_key=${chip}`, {
    headers: chipHeader,
  });
  await send('form token', '/v1/requests', 'POST', '/v1/requests', {
    headers: chipHeader,
    form: { token: chip, bag_id: bagId, external_id: 'ext-log', content_type: 'digital' },
  });
  await send('bad JSON with a token in it', '/v1/requests', 'POST', '/v1/requests', {
    headers: { ...chipHeader, 'content-type': 'application/json' },
    body: `{"token": "${chip}", `,
  });
  await send(
    'JSON token on complete',
    '/v1/requests/:bag_id/complete',
    'POST',
    `/v1/requests/${bagId}/complete`,
    { headers: chipHeader, json: { token: second } },
  );
  await send('wrong token', '/v1/requests', 'GET', '/v1/requests', {
    headers: { authorization: `Bearer ${notAToken}` },
  });
  await send('admin bearer', '/v1/audits', 'GET', '/v1/audits', {
    token: admin,
    headers: { 'x-request-id': 'trace-from-client' },
  });
  const created = sent.find((s) => s.what === 'form token')!;
  t.equal(created.status, 201, 'the form request was accepted (with its stray token field ignored)');
  t.equal(sent.find((s) => s.what === 'wrong token')!.status, 401);

  // Wait until every request's completion line is out.
  const deadline = Date.now() + 10_000;
  const completed = () =>
    stdout.split('\n').filter((l) => l.includes('"request completed"') && !l.includes('/v1/openapi.json'))
      .length;
  while (completed() < sent.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));

  await t.test('stdout is JSON lines', async (t) => {
    const lines = stdout.split('\n').filter((l) => l !== '');
    t.ok(lines.length >= sent.length * 2);
    const bad = lines.filter((l) => {
      try {
        return typeof JSON.parse(l) !== 'object';
      } catch {
        return true;
      }
    });
    t.same(bad, [], 'every line parses as a JSON object');
  });

  await t.test('every request line has a request id and the route template', async (t) => {
    const lines = stdout
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as LogLine)
      .filter((l) => l.req !== undefined || l.res !== undefined)
      // TestDaemon.start polls the document until the daemon answers; those lines may trail in.
      .filter((l) => (l.req?.route ?? l.res?.route) !== '/v1/openapi.json');
    const incoming = lines.filter((l) => l.msg === 'incoming request');
    const done = lines.filter((l) => l.msg === 'request completed');
    t.equal(incoming.length, sent.length, 'one incoming line per request');
    t.equal(done.length, sent.length, 'one completed line per request');
    for (const line of lines) {
      t.type(line.reqId, 'string', `${line.msg} has reqId`);
      t.type(line.req?.route ?? line.res?.route, 'string', `${line.msg} ${line.reqId} has the route`);
    }
    for (const [i, request] of sent.entries()) {
      const line = incoming[i];
      t.equal(line?.req?.route, request.route, `${request.what}: incoming line names ${request.route}`);
      const end = done.find((l) => l.reqId === line?.reqId);
      t.equal(end?.res?.route, request.route, `${request.what}: completed line names the route`);
      t.equal(end?.res?.statusCode, request.status, `${request.what}: completed line has the status`);
    }
    t.equal(incoming.at(-1)!.reqId, 'trace-from-client', 'a client-sent X-Request-Id is the reqId');
    t.notOk(
      lines.some((l) => JSON.stringify(l).includes(bagId) && l.res !== undefined),
      'completed lines carry the template, not the bag id',
    );
  });

  await t.test('no token anywhere in the output', async (t) => {
    await d.stop(); // the last lines are flushed
    for (const [name, secret] of Object.entries({ chip, second, admin, notAToken })) {
      t.notOk(d.output.includes(secret), `${name} is not in the daemon's output`);
    }
    t.match(stdout, /token=\[Redacted\]/, 'query tokens are shown redacted');
  });
});
