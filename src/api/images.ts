/** Image inspection (service notes): characteristics and quality flags of a training image, before training. */
import { parseInput } from './parse-input';
import { FormBody, Upload, type HttpClient, type RequestOptions } from './http';
import { ImageInspectInput, InspectionResult } from './schemas';

/**
 * `POST /images/inspect`.
 *
 * @example
 * const { blurry, selfie } = await api.images.inspect({ name: 'woman', file: '/data/1.jpg' });
 */
export class Images {
  constructor(private readonly http: HttpClient) {}

  /**
   * Inspects one image given as a file (path, Buffer, Blob) or a URL; always sent as a multipart form.
   *
   * @example
   * const result = await api.images.inspect({ name: 'man', file_url: 'https://example.com/1.jpg' });
   */
  async inspect(input: ImageInspectInput, options?: RequestOptions): Promise<InspectionResult> {
    const { name, file, file_url } = parseInput(ImageInspectInput, 'inspect', input);
    const fields = { name, file: file === undefined ? undefined : new Upload(file), file_url };
    return this.http.request('POST', '/images/inspect', InspectionResult, new FormBody(fields), undefined, options);
  }
}
