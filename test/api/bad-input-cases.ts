/**
 * Every rule of spec sections 4 and 8 that the client checks itself, as calls with one bad input each: the field the
 * refusal must name and the rule it must state. Played by test/api/bad-input.test.ts against the client, and by
 * test/workflows/frozen-contract.test.ts against the input contract as a worker shares it between runs (frozen).
 */
import type { PromptCreateInput, TunesApi } from '../../src/api';
import type { ContractJob } from '../workflows/contract-workflows';

const URLS = ['https://example.com/1.jpg'];
const TUNE = { name: 'woman', title: 'bad-input', image_urls: URLS };
export const BASE_TUNE_ID = 1504944;
const BASE = BASE_TUNE_ID;

export interface Case {
  /** What is wrong. */
  name: string;
  call: (api: TunesApi) => PromiseLike<unknown>;
  field: string;
  rule: string;
}

// Values of the wrong type on purpose: the schema must catch what TypeScript would.
export const bad = <T>(value: unknown): T => value as T;

/** A prompt on the base tune, its text given, with `fields` bad. */
function badPrompt(name: string, fields: Partial<PromptCreateInput>, field: string, rule: string): Case {
  return { name, call: (a) => a.prompts.create(BASE, { text: 'x', ...fields }), field, rule };
}

export const badInputCases: Case[] = [
  // --- POST /tunes (spec 4.1)
  {
    name: 'unknown branch',
    call: (a) => a.tunes.create({ ...TUNE, branch: bad('sd3') }),
    field: 'tune.branch',
    rule: 'must be one of',
  },
  {
    name: 'unknown model_type',
    call: (a) => a.tunes.create({ ...TUNE, model_type: bad('dreambooth') }),
    field: 'tune.model_type',
    rule: 'must be one of',
  },
  {
    name: 'unknown preset',
    call: (a) => a.tunes.create({ ...TUNE, model_type: 'lora', preset: bad('flux-lora-slow') }),
    field: 'tune.preset',
    rule: 'must be one of',
  },
  {
    name: 'preset without a LoRA',
    call: (a) => a.tunes.create({ ...TUNE, model_type: null, preset: 'flux-lora-portrait' }),
    field: 'tune.preset',
    rule: 'requires model_type "lora"',
  },
  {
    name: 'both images and image_urls',
    call: (a) => a.tunes.create({ ...TUNE, images: [Buffer.from('x')] }),
    field: 'tune.image_urls',
    rule: 'exactly one of images or image_urls',
  },
  {
    name: 'neither images nor image_urls',
    call: (a) => a.tunes.create({ name: 'woman', title: 'no-images' }),
    field: 'tune.images',
    rule: 'exactly one of images or image_urls',
  },
  {
    name: 'an empty images array',
    call: (a) => a.tunes.create({ name: 'woman', title: 't', images: [] }),
    field: 'tune.images',
    rule: 'at least one image',
  },
  {
    name: 'an image that is neither path, bytes nor Blob',
    call: (a) => a.tunes.create({ name: 'woman', title: 't', images: [bad(42)] }),
    field: 'tune.images[0]',
    rule: 'must be a file path, a Buffer or a Blob',
  },
  {
    name: 'an image path that cannot be read',
    call: (a) => a.tunes.create({ name: 'woman', title: 't', images: ['/nonexistent/tuneflow/1.jpg'] }),
    field: 'tune.images[0]',
    rule: 'must be a readable file',
  },
  {
    name: 'an image URL that is not http(s)',
    call: (a) => a.tunes.create({ ...TUNE, image_urls: ['ftp://example.com/1.jpg'] }),
    field: 'tune.image_urls[0]',
    rule: 'must be an http(s) URL',
  },
  {
    name: 'missing name',
    call: (a) => a.tunes.create(bad({ title: 't', image_urls: URLS })),
    field: 'tune.name',
    rule: 'is required',
  },
  {
    name: 'blank title',
    call: (a) => a.tunes.create({ ...TUNE, title: '   ' }),
    field: 'tune.title',
    rule: 'non-empty',
  },
  {
    name: 'callback that is not a URL',
    call: (a) => a.tunes.create({ ...TUNE, callback: 'not a url' }),
    field: 'tune.callback',
    rule: 'must be an http(s) URL',
  },
  {
    name: 'training steps of 0',
    call: (a) => a.tunes.create({ ...TUNE, steps: 0 }),
    field: 'tune.steps',
    rule: 'at least 1',
  },
  {
    name: 'negative base_tune_id',
    call: (a) => a.tunes.create({ ...TUNE, base_tune_id: -5 }),
    field: 'tune.base_tune_id',
    rule: 'at least 1',
  },
  {
    name: 'face_crop as a string',
    call: (a) => a.tunes.create({ ...TUNE, face_crop: bad('yes') }),
    field: 'tune.face_crop',
    rule: 'must be true or false',
  },
  {
    name: 'a nested characteristic',
    call: (a) => a.tunes.create({ ...TUNE, characteristics: bad({ eye_color: { left: 'blue' } }) }),
    field: 'tune.characteristics.eye_color',
    rule: 'must be a string, a number or a boolean',
  },
  {
    name: 'characteristics as a JSON string that is no object',
    call: (a) => a.tunes.create({ ...TUNE, characteristics: '["blue eyes"]' }),
    field: 'tune.characteristics',
    rule: 'or that object as a JSON string',
  },
  {
    name: 'num_images 9 inside prompts_attributes',
    call: (a) => a.tunes.create({ ...TUNE, prompts_attributes: [{ text: 'ohwx woman', num_images: 9 }] }),
    field: 'tune.prompts_attributes[0].num_images',
    rule: 'from 1 to 8',
  },
  {
    name: 'w not a multiple of 8 inside prompts_attributes',
    call: (a) => a.tunes.create({ ...TUNE, prompts_attributes: [{ text: 'a' }, { text: 'b', w: 513 }] }),
    field: 'tune.prompts_attributes[1].w',
    rule: 'multiple of 8',
  },
  {
    name: 'lora_scale of the wrong type inside prompts_attributes',
    call: (a) => a.tunes.create({ ...TUNE, prompts_attributes: [{ text: 'a', lora_scale: bad('strong') }] }),
    field: 'tune.prompts_attributes[0].lora_scale',
    rule: 'must be a number',
  },

  // --- POST /tunes/:id/prompts (spec 4.5, limits of spec 8)
  badPrompt('num_images 0', { num_images: 0 }, 'prompt.num_images', 'from 1 to 8'),
  badPrompt('num_images 9', { num_images: 9 }, 'prompt.num_images', 'from 1 to 8'),
  badPrompt('num_images 2.5', { num_images: 2.5 }, 'prompt.num_images', 'an integer from 1 to 8'),
  badPrompt('cfg_scale 15.5', { cfg_scale: 15.5 }, 'prompt.cfg_scale', 'from 0 to 15'),
  badPrompt('cfg_scale -1', { cfg_scale: -1 }, 'prompt.cfg_scale', 'from 0 to 15'),
  badPrompt('steps 51', { steps: 51 }, 'prompt.steps', 'from 0 to 50'),
  badPrompt('steps -1', { steps: -1 }, 'prompt.steps', 'from 0 to 50'),
  badPrompt('seed -1', { seed: -1 }, 'prompt.seed', 'from 0 to 4294967296'),
  badPrompt('seed above 2^32', { seed: 2 ** 32 + 1 }, 'prompt.seed', 'from 0 to 4294967296'),
  badPrompt('denoising_strength 1.2', { denoising_strength: 1.2 }, 'prompt.denoising_strength', 'from 0 to 1'),
  badPrompt(
    'controlnet_conditioning_scale -0.1',
    { controlnet_conditioning_scale: -0.1 },
    'prompt.controlnet_conditioning_scale',
    'from 0 to 1',
  ),
  badPrompt('w 500', { w: 500 }, 'prompt.w', 'multiple of 8'),
  { name: 'h 0', call: (a) => a.prompts.create(BASE, { text: 'x', h: 0 }), field: 'prompt.h', rule: 'multiple of 8' },
  badPrompt('unknown scheduler', { scheduler: bad('ddim') }, 'prompt.scheduler', 'must be one of "euler"'),
  badPrompt('unknown style', { style: bad('Watercolor') }, 'prompt.style', 'must be one of "Cinematic"'),
  badPrompt(
    'unknown color_grading',
    { color_grading: bad('Kodachrome') },
    'prompt.color_grading',
    'must be one of "Film Velvia"',
  ),
  badPrompt(
    'unknown controlnet',
    { controlnet: bad('scribble'), input_image_url: URLS[0] },
    'prompt.controlnet',
    'must be one of "composition"',
  ),
  badPrompt(
    'controlnet without an input image',
    { controlnet: 'canny' },
    'prompt.controlnet',
    'requires an input image',
  ),
  badPrompt('backend_version 2', { backend_version: bad('2') }, 'prompt.backend_version', 'must be null or "1"'),
  badPrompt(
    'inpaint_faces without super_resolution',
    { inpaint_faces: true },
    'prompt.inpaint_faces',
    'requires super_resolution',
  ),
  badPrompt(
    'hires_fix with super_resolution off',
    { hires_fix: true, super_resolution: false },
    'prompt.hires_fix',
    'requires super_resolution',
  ),
  badPrompt(
    'mask_image without input_image',
    { mask_image: Buffer.from('mask') },
    'prompt.mask_image',
    'requires input_image',
  ),
  badPrompt(
    'mask_image_url without input_image_url',
    { mask_image_url: URLS[0] },
    'prompt.mask_image_url',
    'requires input_image_url',
  ),
  badPrompt(
    'both input_image and input_image_url',
    { input_image: Buffer.from('i'), input_image_url: URLS[0] },
    'prompt.input_image_url',
    'not both',
  ),
  badPrompt(
    'lora_scale outside prompts_attributes',
    { lora_scale: bad(0.8) },
    'prompt.lora_scale',
    'only inside prompts_attributes',
  ),
  { name: 'empty text', call: (a) => a.prompts.create(BASE, { text: '' }), field: 'prompt.text', rule: 'is required' },
  badPrompt(
    'an empty input_image path',
    { input_image: '' },
    'prompt.input_image',
    'must be a file path, a Buffer or a Blob',
  ),
  badPrompt('a javascript: callback', { callback: 'javascript:alert(1)' }, 'prompt.callback', 'must be an http(s) URL'),
  badPrompt(
    'a listed prompt attribute beside unlisted ones still keeps its rule',
    { aspect_ratio: '16:9', resolution: '1080p', w: 1001 },
    'prompt.w',
    'multiple of 8',
  ),

  // --- list parameters (spec 4.3, 4.7, limits of spec 8)
  {
    name: 'tune list limit 121',
    call: (a) => a.tunes.list({ limit: 121 }),
    field: 'params.limit',
    rule: 'from 1 to 120',
  },
  { name: 'tune list limit 0', call: (a) => a.tunes.list({ limit: 0 }), field: 'params.limit', rule: 'from 1 to 120' },
  {
    name: 'tune list offset 201',
    call: (a) => a.tunes.list({ offset: 201 }),
    field: 'params.offset',
    rule: 'from 0 to 200',
  },
  {
    name: 'tune list offset -1',
    call: (a) => a.tunes.list({ offset: -1 }),
    field: 'params.offset',
    rule: 'from 0 to 200',
  },
  {
    name: 'tune list before_id 0',
    call: (a) => a.tunes.list({ before_id: 0 }),
    field: 'params.before_id',
    rule: 'at least 1',
  },
  {
    name: 'prompt list offset 10,001',
    call: (a) => a.prompts.list(BASE, { offset: 10_001 }),
    field: 'params.offset',
    rule: 'from 0 to 10000',
  },
  {
    name: 'global prompt list limit 500',
    call: (a) => a.prompts.listAll({ limit: 500 }),
    field: 'params.limit',
    rule: 'from 1 to 120',
  },
  {
    name: 'an unknown list parameter',
    call: (a) => a.tunes.list(bad({ page: 2 })),
    field: 'params.page',
    rule: 'is not an attribute the service knows',
  },
  {
    name: 'packs list public as a string',
    call: (a) => a.packs.list(bad({ public: 'yes' })),
    field: 'params.public',
    rule: 'true or false',
  },

  // --- ids in paths
  { name: 'tune id 0', call: (a) => a.tunes.retrieve(0), field: 'tuneId', rule: 'an integer of at least 1' },
  { name: 'tune id 1.5', call: (a) => a.tunes.retrieve(1.5), field: 'tuneId', rule: 'an integer of at least 1' },
  { name: 'tune id -1 on delete', call: (a) => a.tunes.delete(-1), field: 'tuneId', rule: 'an integer of at least 1' },
  {
    name: 'prompt id NaN',
    call: (a) => a.prompts.retrieve(BASE, NaN),
    field: 'promptId',
    rule: 'an integer of at least 1',
  },
  {
    name: 'prompt id as a string',
    call: (a) => a.prompts.delete(BASE, bad('12')),
    field: 'promptId',
    rule: 'an integer of at least 1',
  },
  {
    name: 'tune id 0 on a prompt list',
    call: (a) => a.prompts.list(0),
    field: 'tuneId',
    rule: 'an integer of at least 1',
  },
  {
    name: 'tune id 0 on a prompt create',
    call: (a) => a.prompts.create(0, { text: 'x' }),
    field: 'tuneId',
    rule: 'an integer of at least 1',
  },
  { name: 'pack id 0', call: (a) => a.packs.retrieve(0), field: 'packId', rule: 'an integer of at least 1' },

  // --- POST /p/:pack_id/tunes (spec 4.9)
  {
    name: 'pack tune without a title',
    call: (a) => a.packs.createTune(1, { name: 'man', image_urls: URLS }),
    field: 'tune.title',
    rule: 'is required',
  },
  {
    name: 'pack tune without images',
    call: (a) => a.packs.createTune(1, { name: 'man', title: 't' }),
    field: 'tune.images',
    rule: 'exactly one of images or image_urls',
  },
  {
    name: 'pack tune with tune_ids and image_urls',
    call: (a) => a.packs.createTune(1, { tune_ids: [5], image_urls: URLS }),
    field: 'tune.tune_ids',
    rule: 'replaces images and image_urls',
  },
  {
    name: 'pack tune with an empty tune_ids',
    call: (a) => a.packs.createTune(1, { tune_ids: [] }),
    field: 'tune.tune_ids',
    rule: 'at least one id',
  },
  {
    name: 'pack tune prompt_attributes.callback not a URL',
    call: (a) => a.packs.createTune(1, { ...TUNE, prompt_attributes: { callback: 'nope' } }),
    field: 'tune.prompt_attributes.callback',
    rule: 'must be an http(s) URL',
  },
  {
    name: 'pack tune in an unknown branch',
    call: (a) => a.packs.createTune(1, { ...TUNE, branch: bad('turbo') }),
    field: 'tune.branch',
    rule: 'must be one of "flux1", "sd15", "sdxl1", "fast"',
  },
  {
    name: 'pack tune preset not a string',
    call: (a) => a.packs.createTune(1, { ...TUNE, preset: bad(5) }),
    field: 'tune.preset',
    rule: 'must be a string',
  },
  {
    name: 'pack tune prompts_callback not a URL',
    call: (a) => a.packs.createTune(1, { ...TUNE, prompts_callback: 'later' }),
    field: 'tune.prompts_callback',
    rule: 'must be an http(s) URL',
  },
  {
    name: 'pack tune with a pack id of 0',
    call: (a) => a.packs.createTune(0, TUNE),
    field: 'packId',
    rule: 'an integer of at least 1',
  },

  // --- likes, inspection, themes (service notes)
  { name: 'like of prompt 0', call: (a) => a.likes.create(0), field: 'promptId', rule: 'an integer of at least 1' },
  {
    name: 'unlike of prompt 2.5',
    call: (a) => a.likes.delete(2.5),
    field: 'promptId',
    rule: 'an integer of at least 1',
  },
  {
    name: 'inspection without file or file_url',
    call: (a) => a.images.inspect({ name: 'man' }),
    field: 'inspect.file',
    rule: 'exactly one of file or file_url',
  },
  {
    name: 'inspection with both file and file_url',
    call: (a) => a.images.inspect({ name: 'man', file: Buffer.from('x'), file_url: URLS[0] }),
    field: 'inspect.file',
    rule: 'exactly one of file or file_url',
  },
  {
    name: 'inspection without a name',
    call: (a) => a.images.inspect(bad({ file_url: URLS[0] })),
    field: 'inspect.name',
    rule: 'is required',
  },
  {
    name: 'inspection file_url not a URL',
    call: (a) => a.images.inspect({ name: 'man', file_url: 'photo.jpg' }),
    field: 'inspect.file_url',
    rule: 'must be an http(s) URL',
  },
  {
    name: 'theme with no tunes',
    call: (a) => a.themes.create({ theme: 'beach', tune_ids: [] }),
    field: 'theme.tune_ids',
    rule: 'at least one id',
  },
  {
    name: 'theme with a tune id of 0',
    call: (a) => a.themes.create({ theme: 'beach', tune_ids: [0] }),
    field: 'theme.tune_ids[0]',
    rule: 'at least 1',
  },
  {
    name: 'theme without a theme',
    call: (a) => a.themes.create({ theme: '', tune_ids: [1] }),
    field: 'theme.theme',
    rule: 'is required',
  },
  {
    name: 'theme w not a multiple of 8',
    call: (a) => a.themes.create({ theme: 'beach', tune_ids: [1], prompt_attributes: { w: 100 } }),
    field: 'theme.prompt_attributes.w',
    rule: 'multiple of 8',
  },
  {
    name: 'theme num_images 9',
    call: (a) => a.themes.create({ theme: 'beach', tune_ids: [1], prompt_attributes: { num_images: 9 } }),
    field: 'theme.prompt_attributes.num_images',
    rule: 'from 1 to 8',
  },
  {
    name: 'theme with an unknown attribute',
    call: (a) => a.themes.create(bad({ theme: 'beach', tune_ids: [1], style: 'Cinematic' })),
    field: 'theme.style',
    rule: 'is not an attribute the service knows',
  },
];

/**
 * The catalogue's calls that a workflow input holds, as the jobs whose contract holds the same rule (list, theme and
 * inspection calls left out).
 */
export function catalogueJobs(): Array<{ name: string; job: ContractJob }> {
  const jobs: Array<{ name: string; job: ContractJob }> = [];
  for (const { name, call } of badInputCases) {
    let job: ContractJob | undefined;
    // A job's tune carries no title (tuneflow's own, refused from a starter): the API's cases give one.
    const untitled = (tune: unknown) => {
      if (typeof tune !== 'object' || tune === null || Array.isArray(tune)) return tune;
      const { title: _title, ...rest } = tune as Record<string, unknown>;
      return rest;
    };
    const record = {
      tunes: {
        create: (tune: unknown) =>
          (job = { workflow: 'trainThenGenerate', input: { tune: untitled(tune), prompts: [] } }),
      },
      prompts: {
        create: (tuneId: unknown, prompt: unknown) =>
          (job = { workflow: 'generate', input: { tuneId, prompts: [prompt] } }),
      },
      packs: {
        createTune: (packId: unknown, tune: unknown) =>
          (job = { workflow: 'packTune', input: { packId, tune: untitled(tune) } }),
      },
    };
    try {
      void call(new Proxy(record, { get: (target, key) => target[key as keyof typeof target] ?? {} }) as never);
    } catch {
      // A call on a resource no workflow input holds.
    }
    if (job) jobs.push({ name, job });
  }
  return jobs;
}
