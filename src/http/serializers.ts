/**
 * One response serializer per schema. fastify builds one for each response of each route at
 * start-up (280 here), though they share 41 schemas (the error answers above all), and each
 * build checks every shared schema again: ~300 ms of work at each start. This is fastify's own
 * serializer factory (@fastify/fast-json-stringify-compiler), remembering what it built: the
 * same response schema, under the same shared schemas and options, gets the same serializer.
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

type SerializerFactory = ReturnType<typeof SerializerSelector>;
type Serializer = ReturnType<ReturnType<SerializerFactory>>;

export function sharedSerializers(): SerializerFactory {
  const build = SerializerSelector();
  const scopes = new Map<string, Map<string, Serializer>>();
  return (externalSchemas, options) => {
    const scope = JSON.stringify([externalSchemas, options]);
    const cache = scopes.get(scope) ?? new Map<string, Serializer>();
    scopes.set(scope, cache);
    const compile = build(externalSchemas, options);
    return (route) => {
      const key = JSON.stringify(route.schema);
      let serializer = cache.get(key);
      if (serializer === undefined) cache.set(key, (serializer = compile(route)));
      return serializer;
    };
  };
}
