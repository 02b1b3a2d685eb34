/** Tunes (spec 4.1-4.4): fine-tuned models trained from training images. */
import { z } from 'zod';
import { parseInput } from './parse-input';
import { resourceId, Upload, type HttpClient, type RequestOptions } from './http';
import { PagedList } from './pagination';
import { promptBody } from './prompts';
import { created, DeleteResult, LIMITS, Tune, TuneCreateInput, TuneListParams } from './schemas';

const TuneList = z.array(Tune);
const CreatedTune = created(Tune);
// The body of a tune delete is not shown by the spec: nothing, or any object.
const TuneDeleteResult = DeleteResult.optional();

/**
 * `POST /tunes`, `GET /tunes[/:id]`, `DELETE /tunes/:id`.
 *
 * @example
 * const tune = await api.tunes.create({ title: 'order-42', name: 'woman', branch: 'fast', image_urls: urls });
 */
export class Tunes {
  constructor(private readonly http: HttpClient) {}

  /**
   * Creates a tune; training starts at once. Sent as JSON with `image_urls`, as multipart with `images` (paths,
   * Buffers or Blobs).
   *
   * @example
   * const tune = await api.tunes.create({ title: 'order-42', name: 'man', images: ['/data/1.jpg', '/data/2.jpg'] });
   */
  async create(input: TuneCreateInput, options?: RequestOptions): Promise<Tune> {
    const tune = parseInput(TuneCreateInput, 'tune', input);
    const body = {
      ...tune,
      images: tune.images?.map((file) => new Upload(file)),
      prompts_attributes: tune.prompts_attributes?.map(promptBody),
    };
    return this.http.request('POST', '/tunes', CreatedTune, { tune: body }, undefined, options);
  }

  /**
   * Reads one tune; it is trained once `trained_at` is set.
   *
   * @example
   * const { trained_at } = await api.tunes.retrieve(tuneId);
   */
  async retrieve(tuneId: number, options?: RequestOptions): Promise<Tune> {
    const id = resourceId(tuneId, 'tuneId');
    return this.http.request('GET', `/tunes/${id}`, Tune, undefined, undefined, options);
  }

  /**
   * The account's tunes, newest first: await for a page, iterate for all (paged by `before_id`).
   *
   * @example
   * for await (const tune of api.tunes.list({ limit: 50 })) if (tune.title === 'order-42') console.log(tune.id);
   */
  list(params?: TuneListParams, options?: RequestOptions): PagedList<Tune> {
    return new PagedList(() => {
      // A copy: later pages read it, and the caller's object may change meanwhile.
      const query = { ...parseInput(TuneListParams, 'params', params ?? {}) };
      return {
        limit: query.limit ?? LIMITS.listLimitDefault,
        fetchPage: (beforeId: number | undefined) =>
          this.http.request(
            'GET',
            '/tunes',
            TuneList,
            undefined,
            beforeId === undefined ? query : { before_id: beforeId, limit: query.limit, title: query.title },
            options,
          ),
      };
    });
  }

  /**
   * Deletes a tune (and, for a checkpoint, its prompts).
   *
   * @example
   * await api.tunes.delete(tuneId);
   */
  async delete(tuneId: number, options?: RequestOptions): Promise<DeleteResult> {
    const id = resourceId(tuneId, 'tuneId');
    return (await this.http.request('DELETE', `/tunes/${id}`, TuneDeleteResult, undefined, undefined, options)) ?? {};
  }
}
