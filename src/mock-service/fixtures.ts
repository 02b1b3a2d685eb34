/**
 * Public objects every account sees: the gallery's base tunes (the Flux base 1504944 as on the public service, and the
 * SD 1.5 base 690204 that the service's own example app trains on) and a few packs covering several classes and the
 * three kinds of pack (Flux LoRA, checkpoint, FaceID).
 */
import type { ModelType } from '../api/schemas';

/** The public Flux1.dev base tune: trained, readable by everyone, promptable with `<lora:TUNE_ID:STRENGTH>`. */
export const FLUX_BASE_TUNE = {
  id: 1504944,
  title: 'Flux.1 dev',
  name: null,
  token: '',
  branch: 'flux1',
  model_type: null,
  created_at: '2024-08-01T00:00:00.000Z',
  trained_at: '2024-08-01T00:00:00.000Z',
  expires_at: '2099-12-31T00:00:00.000Z',
} as const;

/**
 * The public gallery base tunes a request may name (`base_tune_id`, or prompts posted to them): trained, readable by
 * every account. Titles are the mock's own.
 */
export const GALLERY_TUNES = [
  FLUX_BASE_TUNE,
  {
    id: 690204,
    title: 'SD 1.5 base',
    name: null,
    token: 'sks',
    branch: 'sd15',
    model_type: null,
    created_at: '2023-03-01T00:00:00.000Z',
    trained_at: '2023-03-01T00:00:00.000Z',
    expires_at: '2099-12-31T00:00:00.000Z',
  },
] as const;

/** A prompt of a pack, before it is given to a tune; `{{key}}` placeholders take the tune's characteristics. */
export interface PackPromptTemplate {
  text: string;
  negative_prompt?: string;
  num_images: number;
  w: number;
  h: number;
  cfg_scale?: number;
  steps?: number;
}

export interface PackFixture {
  id: number;
  slug: string;
  title: string;
  token: string;
  base_tune_id: number | null;
  model_type: ModelType | null;
  preset: string | null;
  multiplier: number;
  public_at: string;
  created_at: string;
  /** Millicents per class; its keys are the classes the pack supports. */
  cost_mc_hash: Record<string, number>;
  prompts_per_class: Record<string, PackPromptTemplate[]>;
}

const portrait = { w: 768, h: 1024, num_images: 2 } as const;
const square = { w: 1024, h: 1024, num_images: 1 } as const;

export const PACKS: readonly PackFixture[] = [
  {
    id: 260,
    slug: 'corporate-headshots',
    title: 'Corporate Headshots',
    token: 'ohwx',
    base_tune_id: FLUX_BASE_TUNE.id,
    model_type: 'lora',
    preset: 'flux-lora-portrait',
    multiplier: 10,
    public_at: '2024-09-01T00:00:00.000Z',
    created_at: '2024-09-01T00:00:00.000Z',
    cost_mc_hash: { man: 150_000, woman: 150_000 },
    prompts_per_class: {
      man: [
        { text: 'ohwx man, corporate headshot, {{eye_color}}, navy suit, office background', ...portrait },
        { text: 'ohwx man, {{hair_color}} hair, linkedin profile photo, soft light', ...portrait },
        { text: 'ohwx man, speaking at a conference, {{eye_color}}', ...square, cfg_scale: 3.5 },
      ],
      woman: [
        { text: 'ohwx woman, corporate headshot, {{eye_color}}, blazer, office background', ...portrait },
        { text: 'ohwx woman, {{hair_color}} hair, linkedin profile photo, soft light', ...portrait },
        { text: 'ohwx woman, speaking at a conference, {{eye_color}}', ...square, cfg_scale: 3.5 },
      ],
    },
  },
  {
    id: 261,
    slug: 'pet-portraits',
    title: 'Pet Portraits',
    token: 'sks',
    base_tune_id: null,
    model_type: null,
    preset: null,
    multiplier: 5,
    public_at: '2024-10-01T00:00:00.000Z',
    created_at: '2024-10-01T00:00:00.000Z',
    cost_mc_hash: { cat: 80_000, dog: 80_000 },
    prompts_per_class: {
      cat: [
        { text: 'sks cat as a renaissance painting, {{fur}} fur', ...square, negative_prompt: 'blurry, text' },
        { text: 'sks cat astronaut, {{fur}} fur, studio light', ...square, steps: 30 },
      ],
      dog: [
        { text: 'sks dog as a renaissance painting, {{fur}} fur', ...square, negative_prompt: 'blurry, text' },
        { text: 'sks dog astronaut, {{fur}} fur, studio light', ...square, steps: 30 },
      ],
    },
  },
  {
    id: 262,
    slug: 'instant-avatars',
    title: 'Instant Avatars',
    token: 'ohwx',
    base_tune_id: FLUX_BASE_TUNE.id,
    model_type: 'faceid',
    preset: null,
    multiplier: 2,
    public_at: '2024-11-01T00:00:00.000Z',
    created_at: '2024-11-01T00:00:00.000Z',
    cost_mc_hash: { man: 40_000, woman: 40_000, boy: 40_000, girl: 40_000 },
    prompts_per_class: Object.fromEntries(
      ['man', 'woman', 'boy', 'girl'].map((name) => [
        name,
        [
          { text: `${name}, watercolor avatar, {{hair_color}} hair`, ...square },
          { text: `${name}, 3d cartoon avatar, {{eye_color}}`, ...square },
        ],
      ]),
    ),
  },
];
