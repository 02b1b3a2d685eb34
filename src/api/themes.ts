/** Themes (service notes): ten prompts per tune on a theme, read back through the tunes' prompt lists. */
import { parseInput } from './parse-input';
import type { HttpClient, RequestOptions } from './http';
import { ThemeCreateInput, ThemeResult } from './schemas';

/**
 * `POST /themes`.
 *
 * @example
 * await api.themes.create({ theme: 'sunny beach', tune_ids: [tuneId], prompt_attributes: { num_images: 1 } });
 */
export class Themes {
  constructor(private readonly http: HttpClient) {}

  /**
   * Creates the prompts of a theme on each tune; the answer is not documented, so it is returned as is.
   *
   * @example
   * await api.themes.create({ theme: 'astronaut', tune_ids: [1, 2], prompt_attributes: { w: 512, h: 512 } });
   */
  async create(input: ThemeCreateInput, options?: RequestOptions): Promise<unknown> {
    const theme = parseInput(ThemeCreateInput, 'theme', input);
    return this.http.request('POST', '/themes', ThemeResult, theme, undefined, options);
  }
}
