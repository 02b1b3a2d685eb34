/**
 * The client's check of what a caller asks it to send: every input (a tune or prompt to create, list parameters) is
 * validated here before anything is sent. Apart from errors.ts, so that the workflow bundles, which hold errors.ts for
 * the input contract's errors, do not hold the compiled check.
 */
import type { z } from 'zod';
import { acceptsInputAsIs } from './answer-check';
import { InvalidInputError } from './errors';

/**
 * Validates `value` against `schema`, throwing an InvalidInputError that names each field and rule. A value zod would
 * return unchanged (nearly every input) passes the compiled as-is check and is returned as it is: in a busy worker a
 * zod parse of a prompt to create cost 110 us of CPU (perf, 1,000-job soak). Plain data only (acceptsInputAsIs); and
 * it is then the caller's own object, so what keeps it past the call (a list's later pages) keeps a copy.
 */
export function parseInput<S extends z.ZodType>(schema: S, subject: string, value: unknown): z.output<S> {
  if (acceptsInputAsIs(schema, value)) return value as z.output<S>;
  const result = schema.safeParse(value);
  if (!result.success) throw InvalidInputError.fromZod(subject, result.error);
  return result.data;
}
