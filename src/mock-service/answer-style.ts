/**
 * How the mock renders its answers and callbacks. `plain` is the spec's JSON; `rails` is what the live service has
 * been seen to send (a Rails app): decimals as strings (`"cfg_scale": "3.0"`), an empty text column as `""`, and a
 * prompt create answered as a one-element array. Clients must read both.
 */
export const AnswerStyle = { plain: 'plain', rails: 'rails' } as const;
export type AnswerStyle = (typeof AnswerStyle)[keyof typeof AnswerStyle];

/** Decimal columns: Rails renders a BigDecimal as a string (money too: `"cost_mc": "150000.0"`). */
const DECIMALS: ReadonlySet<string> = new Set([
  'cfg_scale',
  'denoising_strength',
  'controlnet_conditioning_scale',
  'lora_scale',
  'multiplier',
  'cost_mc',
]);
/** Text columns that are empty rather than null. */
const EMPTY_TEXT: ReadonlySet<string> = new Set(['negative_prompt']);

/**
 * A JSON body as the live service renders it; a new value, the argument is left as it is.
 * @example railsStyle({ cfg_scale: 3, negative_prompt: null }) // { cfg_scale: '3.0', negative_prompt: '' }
 */
export function railsStyle(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(railsStyle);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    if (typeof field === 'number' && DECIMALS.has(key))
      out[key] = Number.isInteger(field) ? field.toFixed(1) : String(field);
    else if (field === null && EMPTY_TEXT.has(key)) out[key] = '';
    else out[key] = railsStyle(field);
  }
  return out;
}

/** Routes whose created object the live service has answered inside a one-element array. */
export const ARRAY_ANSWER_ROUTES: ReadonlySet<string> = new Set(['POST /tunes/:id/prompts']);
