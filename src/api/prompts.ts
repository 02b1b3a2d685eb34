/** Prompts (spec 4.5-4.8): text that makes a tune generate images; the prompt object holds them once done. */
import { z } from 'zod';
import { parseInput } from './parse-input';
import { resourceId, Upload, type HttpClient, type RequestOptions } from './http';
import { PagedList } from './pagination';
import {
  created,
  DeleteResult,
  LIMITS,
  Prompt,
  PromptCreateInput,
  PromptListParams,
  type PromptAttributesInput,
} from './schemas';

const PromptList = z.array(Prompt);
// The service has answered a prompt create with a one-element array (its official client handles that).
const CreatedPrompt = created(Prompt);

/**
 * The wire form of prompt attributes: files become multipart parts (`prompt[input_image]`), everything else as is.
 * Shared with tune creation, whose `prompts_attributes` take the same attributes.
 */
export function promptBody<P extends Pick<PromptAttributesInput, 'input_image' | 'mask_image'>>(prompt: P): P {
  if (prompt.input_image === undefined && prompt.mask_image === undefined) return prompt;
  return {
    ...prompt,
    input_image: prompt.input_image === undefined ? undefined : new Upload(prompt.input_image),
    mask_image: prompt.mask_image === undefined ? undefined : new Upload(prompt.mask_image),
  };
}

/**
 * `POST /tunes/:id/prompts`, `GET /tunes/:id/prompts[/:id]`, `GET /prompts`, `DELETE /tunes/:id/prompts/:id`.
 *
 * @example
 * const prompt = await api.prompts.create(1504944, { text: '<lora:123456:1> ohwx woman, studio portrait', num_images: 2 });
 */
export class Prompts {
  constructor(private readonly http: HttpClient) {}

  /**
   * Creates a prompt on a tune (JSON, or multipart when `input_image` / `mask_image` is a file).
   *
   * @example
   * const prompt = await api.prompts.create(tuneId, { text: 'ohwx man on a beach', num_images: 4, w: 512, h: 640 });
   */
  async create(tuneId: number, input: PromptCreateInput, options?: RequestOptions): Promise<Prompt> {
    const id = resourceId(tuneId, 'tuneId');
    const prompt = parseInput(PromptCreateInput, 'prompt', input);
    return this.http.request(
      'POST',
      `/tunes/${id}/prompts`,
      CreatedPrompt,
      { prompt: promptBody(prompt) },
      undefined,
      options,
    );
  }

  /**
   * Reads one prompt of a tune; `images` is filled once it has run.
   *
   * @example
   * const { images } = await api.prompts.retrieve(tuneId, promptId);
   */
  async retrieve(tuneId: number, promptId: number, options?: RequestOptions): Promise<Prompt> {
    const tune = resourceId(tuneId, 'tuneId');
    const id = resourceId(promptId, 'promptId');
    return this.http.request('GET', `/tunes/${tune}/prompts/${id}`, Prompt, undefined, undefined, options);
  }

  /**
   * Reads one prompt by its id alone (`GET /prompts/:id`), as the service's official client polls it.
   *
   * @example
   * const { images, tune_id } = await api.prompts.retrieveById(promptId);
   */
  async retrieveById(promptId: number, options?: RequestOptions): Promise<Prompt> {
    const id = resourceId(promptId, 'promptId');
    return this.http.request('GET', `/prompts/${id}`, Prompt, undefined, undefined, options);
  }

  /**
   * The prompts of one tune, newest first: await for a page, iterate for all.
   *
   * @example
   * for await (const prompt of api.prompts.list(tuneId, { limit: 120 })) console.log(prompt.id, prompt.images);
   */
  list(tuneId: number, params?: PromptListParams, options?: RequestOptions): PagedList<Prompt> {
    return new PagedList(() => {
      const id = resourceId(tuneId, 'tuneId');
      return this.#pages(`/tunes/${id}/prompts`, params, options);
    });
  }

  /**
   * Every prompt of the account, newest first: await for a page, iterate for all.
   *
   * @example
   * const latest = await api.prompts.listAll({ limit: 10 });
   */
  listAll(params?: PromptListParams, options?: RequestOptions): PagedList<Prompt> {
    return new PagedList(() => this.#pages('/prompts', params, options));
  }

  /**
   * Deletes a prompt of a tune; the service answers with a `message`.
   *
   * @example
   * const { message } = await api.prompts.delete(tuneId, promptId);
   */
  async delete(tuneId: number, promptId: number, options?: RequestOptions): Promise<DeleteResult> {
    const tune = resourceId(tuneId, 'tuneId');
    const id = resourceId(promptId, 'promptId');
    return this.http.request('DELETE', `/tunes/${tune}/prompts/${id}`, DeleteResult, undefined, undefined, options);
  }

  #pages(path: string, params: PromptListParams | undefined, options: RequestOptions | undefined) {
    // A copy: later pages read it, and the caller's object may change meanwhile.
    const query = { ...parseInput(PromptListParams, 'params', params ?? {}) };
    const limit = query.limit ?? LIMITS.listLimitDefault;
    return {
      limit,
      fetchPage: (beforeId: number | undefined) =>
        this.http.request(
          'GET',
          path,
          PromptList,
          undefined,
          beforeId === undefined ? query : { before_id: beforeId, limit: query.limit },
          options,
        ),
    };
  }
}
