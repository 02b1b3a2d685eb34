/** Packs (spec 4.9, service notes): curated prompts plus training settings; a tune made from one gets its prompts. */
import { z } from 'zod';
import { parseInput } from './parse-input';
import { resourceId, Upload, type HttpClient, type RequestOptions } from './http';
import { created, Pack, PackDetail, PackListParams, PackTuneCreateInput, Tune } from './schemas';

const PackList = z.array(Pack);
const CreatedTune = created(Tune);

/**
 * `GET /packs`, `GET /p/:id`, `POST /p/:id/tunes`.
 *
 * @example
 * const [pack] = await api.packs.list();
 * const tune = await api.packs.createTune(pack.id, { title: 'order-42', name: 'woman', image_urls: urls });
 */
export class Packs {
  constructor(private readonly http: HttpClient) {}

  /**
   * The packs the account can use (one answer: packs are not paged).
   *
   * @example
   * const packs = await api.packs.list({ public: true, listed: true });
   */
  async list(params?: PackListParams, options?: RequestOptions): Promise<Pack[]> {
    const query = parseInput(PackListParams, 'params', params ?? {});
    return this.http.request('GET', '/packs', PackList, undefined, query, options);
  }

  /**
   * One pack with its costs and prompts per class (its supported classes are the keys).
   *
   * @example
   * const classes = Object.keys((await api.packs.retrieve(packId)).prompts_per_class ?? {});
   */
  async retrieve(packId: number, options?: RequestOptions): Promise<PackDetail> {
    const id = resourceId(packId, 'packId');
    return this.http.request('GET', `/p/${id}`, PackDetail, undefined, undefined, options);
  }

  /**
   * Creates a tune from a pack: trained with the pack's settings, given the pack's prompts for its class.
   * `prompt_attributes.callback` is sent as `tune[prompt_attributes][callback]` (spec 4.9).
   *
   * @example
   * const tune = await api.packs.createTune(packId, {
   *   title: 'order-42', name: 'man', image_urls: urls, prompts_callback: 'https://example.com/cb?job=42',
   * });
   */
  async createTune(packId: number, input: PackTuneCreateInput, options?: RequestOptions): Promise<Tune> {
    const id = resourceId(packId, 'packId');
    const tune = parseInput(PackTuneCreateInput, 'tune', input);
    const body = { ...tune, images: tune.images?.map((file) => new Upload(file)) };
    return this.http.request('POST', `/p/${id}/tunes`, CreatedTune, { tune: body }, undefined, options);
  }
}
