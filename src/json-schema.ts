/**
 * TypeBox helpers shared by the configuration (config/) and the wire shapes (http/schemas.ts):
 * shapes TypeBox has no short spelling for, kept in the plain JSON Schema form that ajv, the
 * serializer and the OpenAPI document read (`enum` rather than a union of constants).
 */
import { Type, type SchemaOptions, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox';

/** One of a few strings, as `{"type": "string", "enum": [...]}`. */
export const StringEnum = <const T extends readonly string[]>(values: T, options: SchemaOptions = {}) =>
  Type.Unsafe<T[number]>({ ...options, type: 'string', enum: values }) as TUnsafe<T[number]> & { enum: T };

/** A string or integer that may be null, as `{"type": [..., "null"]}`. */
export const Nullable = <T extends TSchema & { type: string }>(schema: T, options: SchemaOptions = {}) =>
  Type.Unsafe<Static<T> | null>({ ...schema, ...options, type: [schema.type, 'null'] });

/** A string of at least one character. */
export const NonEmpty = (options: SchemaOptions = {}) => Type.String({ minLength: 1, ...options });

/**
 * One of several object shapes, told apart by the constant of property `tag` (ajv's
 * `discriminator`: only the matching shape's problems are reported, and its defaults applied).
 */
export const OneOf = <T extends TSchema[]>(tag: string, shapes: [...T], options: SchemaOptions = {}) =>
  Type.Unsafe<Static<T[number]>>({
    ...options,
    type: 'object',
    required: [tag],
    discriminator: { propertyName: tag },
    oneOf: shapes,
  });
