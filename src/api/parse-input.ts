/**
 * The client's check of what a caller asks it to send: every input (a tune or prompt to create, list parameters) is
 * validated here before anything is sent. Apart from errors.ts, so that the workflow bundles, which hold errors.ts for
 * the input contract's errors, do not hold the compiled check.
 */
import type { z } from 'zod';
import { acceptsAsIs } from './answer-check';
import { InvalidInputError } from './errors';

/**
 * Validates `value` against `schema`, throwing an InvalidInputError that names each field and rule. A value zod would
 * return unchanged (nearly every input) passes the compiled as-is check and is returned as it is: in a busy worker a
 * zod parse of a prompt to create cost 110 us of CPU.
 */
export function parseInput<S extends z.ZodType>(schema: S, subject: string, value: unknown): z.output<S> {
  if (acceptsAsIs(schema, value)) return value as z.output<S>;
  const result = schema.safeParse(value);
  if (!result.success) throw InvalidInputError.fromZod(subject, result.error);
  return result.data;
}
