/** Likes (service notes): feedback on prompts, aggregated to sort prompts and packs. */
import { z } from 'zod';
import { resourceId, type HttpClient, type RequestOptions } from './http';

// 201 with an empty body; anything else the service may add is ignored.
const LikeAnswer = z.unknown();

/**
 * `POST /prompts/:id/likes`, `DELETE /prompts/:id/likes`.
 *
 * @example
 * await api.likes.create(promptId);
 */
export class Likes {
  constructor(private readonly http: HttpClient) {}

  /**
   * Likes a prompt.
   *
   * @example
   * await api.likes.create(promptId);
   */
  async create(promptId: number, options?: RequestOptions): Promise<void> {
    const id = resourceId(promptId, 'promptId');
    await this.http.request('POST', `/prompts/${id}/likes`, LikeAnswer, undefined, undefined, options);
  }

  /**
   * Takes a like of a prompt back.
   *
   * @example
   * await api.likes.delete(promptId);
   */
  async delete(promptId: number, options?: RequestOptions): Promise<void> {
    const id = resourceId(promptId, 'promptId');
    await this.http.request('DELETE', `/prompts/${id}/likes`, LikeAnswer, undefined, undefined, options);
  }
}
