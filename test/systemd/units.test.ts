/**
 * The shipped systemd units: `systemd-analyze verify` accepts them (run on copies in a temporary
 * unit directory, so `Requires=`, `OnFailure=` and the timer's service resolve against each
 * other), and the settings the operator's contract depends on are there.
 */
import { spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const unitsDir = resolve(dirname(fileURLToPath(import.meta.url)), '../../../systemd');
const UNITS = [
  'preservd.service',
  'preservd-audit.service',
  'preservd-audit.timer',
  'preservd-audit-failed@.service',
];

/** `Key=value` lines of a unit, by section (later lines of the same key are kept in order). */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const section = /^\[(.+)\]$/.exec(line);
    if (section) {
      current = new Map();
      sections.set(section[1]!, current);
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0 || current === undefined) continue;
    const key = line.slice(0, eq).trim();
    current.set(key, [...(current.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return sections;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

t.test('the units pass systemd-analyze verify', async (t) => {
  const probe = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    t.plan(0, 'systemd-analyze is not installed here');
    return;
  }
  t.same(readdirSync(unitsDir).sort(), [...UNITS].sort(), 'the systemd folder holds these units');
  const dir = mkdtempSync(join(tmpdir(), 'preservd-units-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const name of UNITS) {
    // verify checks that ExecStart's program exists; where one does not on this machine, the
    // copy points at /bin/true so only our unit files are judged.
    const text = readFileSync(join(unitsDir, name), 'utf8').replace(
      /^(ExecStart=)(\S+)(.*)$/gm,
      (line, key: string, program: string) => (executable(program) ? line : `${key}/bin/true`),
    );
    writeFileSync(join(dir, name), text);
  }
  const verify = spawnSync(
    'systemd-analyze',
    [
      'verify',
      '--man=no',
      ...['preservd.service', 'preservd-audit.service', 'preservd-audit.timer'].map((n) => join(dir, n)),
      'preservd-audit-failed@preservd-audit.service.service',
    ],
    { encoding: 'utf8', env: { ...process.env, SYSTEMD_UNIT_PATH: `${dir}:`, SYSTEMD_LOG_COLOR: '0' } },
  );
  const output = `${verify.stdout}${verify.stderr}`;
  const aboutOurs = output.split('\n').filter((l) => /preservd/.test(l));
  t.equal(verify.status, 0, `systemd-analyze verify exits 0\n${output}`);
  t.same(aboutOurs, [], 'no complaint about our units');
});

t.test('the settings operators rely on', async (t) => {
  const unit = (name: string) => parseUnit(readFileSync(join(unitsDir, name), 'utf8'));
  const serve = unit('preservd.service').get('Service')!;
  const one = (section: Map<string, string[]>, key: string) => section.get(key)?.at(-1);
  t.match(one(serve, 'ExecStart'), /\bpreservd serve$/);
  t.equal(one(serve, 'User'), 'preservd');
  t.equal(one(serve, 'ProtectSystem'), 'strict');
  t.equal(one(serve, 'ReadWritePaths'), '/var/lib/preservd');
  t.equal(one(serve, 'NoNewPrivileges'), 'yes');
  t.equal(one(serve, 'PrivateTmp'), 'yes');
  t.equal(one(serve, 'ProtectHome'), 'yes');
  t.equal(one(serve, 'Restart'), 'on-failure');
  t.equal(one(serve, 'KillSignal'), 'SIGTERM');
  t.match(one(serve, 'TimeoutStopSec'), /^\d+/);
  t.ok(serve.get('Environment')?.includes('PRESERVD_DATA_DIR=/var/lib/preservd'));

  const audit = unit('preservd-audit.service');
  t.equal(one(audit.get('Service')!, 'Type'), 'oneshot');
  t.match(one(audit.get('Service')!, 'ExecStart'), /\bpreservd audit --wait$/);
  const onFailure = one(audit.get('Unit')!, 'OnFailure')!;
  t.match(onFailure, /^preservd-audit-failed@%n\.service$/);
  t.ok(UNITS.includes(onFailure.replace(/@.*$/, '@.service')), 'the OnFailure template is shipped');
  const alert = unit('preservd-audit-failed@.service').get('Service')!;
  t.match(one(alert, 'ExecStart'), /systemd-cat/, 'the alert hook writes to the journal');

  const timer = unit('preservd-audit.timer').get('Timer')!;
  t.equal(one(timer, 'OnCalendar'), 'weekly');
  t.equal(one(timer, 'Persistent'), 'true');
  t.match(one(timer, 'RandomizedDelaySec'), /^\d+/);
});
