/**
 * `POST /themes` (service notes): a theme, tune ids and a few prompt attributes in; 10 prompts per tune out, read
 * back through `GET /tunes/:id/prompts`. The answer is 201 with an empty body, as the service's docs show.
 */
import { ThemeCreateInput } from '../api/schemas';
import { unprocessable, type RouteDefinition, type ServiceParts } from './requests';

/** Ten takes on one theme. */
const VARIATIONS = [
  'close-up portrait',
  'full body shot',
  'candid moment',
  'golden hour light',
  'studio lighting',
  'wide angle, environment',
  'cinematic still',
  'editorial photo',
  'black and white',
  'soft pastel colors',
];

/** The theme route of the mock. */
export function themeRoutes(parts: ServiceParts): RouteDefinition[] {
  const { store, simulation } = parts;
  return [
    {
      method: 'POST',
      pattern: '/themes',
      kind: 'api',
      async handle(ctx) {
        const account = ctx.account;
        const { input } = await ctx.bodyInput(ThemeCreateInput);
        const tunes = input.tune_ids.map((id) => {
          const tune = store.ownTune(account, id);
          if (!tune) throw unprocessable('tune_ids', `${id} is not a tune of this account`);
          return tune;
        });
        for (const tune of tunes)
          for (const variation of VARIATIONS)
            simulation.createPrompt(account, tune, {
              text: [tune.token, tune.name].filter(Boolean).join(' ') + `, ${input.theme}, ${variation}`,
              ...input.prompt_attributes,
            });
        return { status: 201 };
      },
    },
  ];
}
