/**
 * Lists of the service (tunes, prompts) are pages, newest first. A PagedList is what a list method returns: await it
 * for the first page, or iterate it for every item, paging with the keyset cursor `before_id` (spec 4.3, 4.7), never
 * with deep offsets, which the service refuses beyond 200 tunes or 10,000 prompts.
 */

/** How a PagedList reaches its pages; built on first use, so input validation errors surface there. */
export interface PageSource<T> {
  /** The page size asked for: a shorter page is the last one. */
  readonly limit: number;
  /** The first page with the caller's params when `beforeId` is undefined, else the page of items older than it. */
  fetchPage(beforeId: number | undefined): Promise<T[]>;
}

/**
 * The result of a list method: awaitable (the first page, with the given params) and async-iterable (every item,
 * across pages). Like openai-node's PagePromise. Nothing is requested until it is awaited or iterated.
 *
 * @example
 * const firstPage = await api.tunes.list({ limit: 10 });
 * for await (const tune of api.tunes.list({ limit: 100 })) console.log(tune.id);
 */
export class PagedList<T extends { id: number }> implements PromiseLike<T[]>, AsyncIterable<T> {
  readonly #openSource: () => PageSource<T>;
  #source?: PageSource<T>;
  #firstPage?: Promise<T[]>;

  /** `openSource` validates the list's input and says how to fetch a page; it runs once, on first use. */
  constructor(openSource: () => PageSource<T>) {
    this.#openSource = openSource;
  }

  /**
   * Resolves to the first page; awaiting again gives the same page without another request.
   *
   * @example
   * const tunes = await api.tunes.list({ limit: 5 });
   */
  then<R1 = T[], R2 = never>(
    onfulfilled?: ((value: T[]) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    this.#firstPage ??= this.#fetch(undefined);
    return this.#firstPage.then(onfulfilled, onrejected);
  }

  /**
   * Every page in turn, newest first: the caller's params for the first, then `before_id` = the id of the last item
   * of the previous page. Stops after an empty page or one shorter than the limit.
   *
   * @example
   * for await (const page of api.prompts.listAll({ limit: 120 }).pages()) console.log(page.length);
   */
  async *pages(): AsyncGenerator<T[], void, undefined> {
    let beforeId: number | undefined;
    for (;;) {
      const page = await this.#fetch(beforeId);
      if (page.length > 0) yield page;
      if (page.length === 0 || page.length < this.#open().limit) return;
      beforeId = page[page.length - 1].id;
    }
  }

  /**
   * Every item across pages, fetched one page at a time as the loop goes; breaking out stops the paging.
   *
   * @example
   * for await (const prompt of api.prompts.list(tuneId)) if (prompt.images?.length) console.log(prompt.images);
   */
  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page;
  }

  #open(): PageSource<T> {
    this.#source ??= this.#openSource();
    return this.#source;
  }

  async #fetch(beforeId: number | undefined): Promise<T[]> {
    return this.#open().fetchPage(beforeId);
  }
}
