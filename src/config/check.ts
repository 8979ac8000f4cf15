/**
 * Checks a configuration against its schema (schema.ts) with ajv, filling in the defaults, and
 * says every problem in words that name the key and what it must be, in the order of the schema
 * (docs/configuration.md's order), together with the few rules a schema cannot state.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { ConfigSchema, type Config } from './schema.js';
import { checkReplicas } from './replicas.js';

const ajv = new Ajv({ useDefaults: true, allErrors: true, discriminator: true, verbose: true });
ajv.addVocabulary(['problem']); // the words of a problem (schema.ts): an annotation, no check
ajv.addFormat('http-url', (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol));
const validate = ajv.compile<Config>(ConfigSchema);

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  patternProperties?: Record<string, Schema>;
  items?: Schema;
  oneOf?: Schema[];
  enum?: readonly string[];
  const?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  format?: string;
  problem?: string;
}

const FORMATS: Record<string, string> = { 'http-url': 'must be an http(s) URL' };
const quoted = (values: readonly string[]) =>
  values
    .map((v) => `"${v}"`)
    .join(', ')
    .replace(/, ([^,]*)$/, ' or $1');

/** What a value of `s` must be, in words. */
function expected(s: Schema): string {
  if (s.problem !== undefined) return s.problem;
  if (s.enum !== undefined) return `must be ${quoted(s.enum)}`;
  if (s.oneOf !== undefined) return 'must be an object';
  switch (s.type ?? 'string') {
    case 'integer':
      return s.maximum === undefined
        ? `must be an integer ≥ ${s.minimum}`
        : `must be an integer from ${s.minimum} to ${s.maximum}`;
    case 'number':
      return `must be a number ≥ ${s.minimum}`;
    case 'boolean':
      return 'must be true or false';
    case 'object':
      return 'must be an object';
    case 'array':
      return 'must be an array';
    default:
      if (s.format !== undefined) return FORMATS[s.format] ?? `must be a ${s.format}`;
      return s.minLength === undefined ? 'must be a string' : 'must be a non-empty string';
  }
}

/** `/replicas/0/name` → `replicas[0].name`. */
const keyOf = (segments: string[]) =>
  segments.map((s, i) => (/^\d+$/.test(s) ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');

/** What property `key` of an object of schema `parent` must be; a shape's tag names the shapes'. */
function expectedOf(parent: Schema, key: string): string {
  const own = parent.properties?.[key];
  if (own !== undefined || parent.oneOf === undefined) return expected(own ?? {});
  return `must be ${quoted(parent.oneOf.map((shape) => shape.properties?.[key]?.const ?? '?'))}`;
}

/** A key and what is wrong with it, from one ajv error. */
function problemOf(e: ErrorObject): [string[], string] {
  const at = e.instancePath.split('/').slice(1);
  const parent = e.parentSchema as Schema;
  const params = e.params as { missingProperty?: string; tag?: string };
  if (e.keyword === 'required')
    return [[...at, params.missingProperty!], expectedOf(parent, params.missingProperty!)];
  if (e.keyword === 'discriminator') return [[...at, params.tag!], expectedOf(parent, params.tag!)];
  return [at, expected(parent)];
}

/** Where a key comes in the schema: its place among its siblings at each level. */
function placeOf(segments: string[]): number[] {
  let s: Schema | undefined = ConfigSchema as Schema;
  return segments.map((segment) => {
    if (/^\d+$/.test(segment)) {
      s = s?.items;
      return Number(segment);
    }
    const siblings: Record<string, Schema> = Object.assign(
      {},
      ...[s, ...(s?.oneOf ?? [])].map((b) => b?.properties ?? {}),
    );
    const keys = Object.keys(siblings);
    s = siblings[segment] ?? Object.values(s?.patternProperties ?? {})[0];
    return keys.includes(segment) ? keys.indexOf(segment) : keys.length;
  });
}

function before(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/**
 * Every problem with a configuration as written (file and environment merged), each naming its
 * key, one per key. Fills in the defaults of `config` as it goes; when the answer is empty,
 * `config` is a whole `Config`.
 */
export function checkConfig(config: Record<string, unknown>): string[] {
  const found: Array<[string[], string]> = [];
  if (!validate(config)) found.push(...validate.errors!.map(problemOf));
  const upload = config.upload as { rsync?: { enabled?: unknown }; linkTemplate?: unknown } | undefined;
  if (upload?.rsync?.enabled === false && upload.linkTemplate === undefined)
    found.push([['upload', 'linkTemplate'], 'required when upload.rsync.enabled is false']);
  found.push(...checkReplicas(config.replicas));
  const ordered = found.map(([segments, problem]) => ({
    place: placeOf(segments),
    key: keyOf(segments),
    problem,
  }));
  ordered.sort((a, b) => before(a.place, b.place)); // stable: a key's schema problem before a hand-checked one
  const lines = new Map<string, string>();
  for (const { key, problem } of ordered) if (!lines.has(key)) lines.set(key, `${key}: ${problem}`);
  return [...lines.values()];
}
