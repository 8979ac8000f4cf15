/**
 * One response serializer per schema (src/http/serializers.ts): the same schema under the same
 * shared schemas gets the serializer built for it before; another schema, or other shared
 * schemas, get their own, and each serializes as fast-json-stringify does.
 */
import t from 'tap';
import { sharedSerializers } from '../../src/http/serializers.js';

const shared = { Error: { $id: 'Error', type: 'object', properties: { error: { type: 'string' } } } };
const route = (schema: unknown, url: string) => ({ schema, url, method: 'GET', httpStatus: '404' });

t.test('a schema seen before gets the same serializer', async (t) => {
  const factory = sharedSerializers();
  const compile = factory(shared, {});
  const error = compile(route({ $ref: 'Error#' }, '/a'));
  t.equal(compile(route({ $ref: 'Error#' }, '/b')), error, 'another route, an equal schema: the same one');
  t.equal(
    factory(shared, {})(route({ $ref: 'Error#' }, '/c')),
    error,
    'and in a scope with the same shared schemas',
  );
  t.equal(
    error({ error: 'no such package', extra: 1 }),
    '{"error":"no such package"}',
    'it serializes by the schema',
  );

  const count = compile(route({ type: 'object', properties: { n: { type: 'integer' } } }, '/d'));
  t.not(count, error, 'another schema: another serializer');
  t.equal(count({ n: 3 }), '{"n":3}');

  const other = { Error: { $id: 'Error', type: 'object', properties: { code: { type: 'string' } } } };
  const otherError = factory(other, {})(route({ $ref: 'Error#' }, '/a'));
  t.not(otherError, error, 'other shared schemas: another serializer');
  t.equal(otherError({ error: 'x', code: 'c' }), '{"code":"c"}');
});
