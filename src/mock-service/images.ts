/**
 * Generated images, drawn when their URL is fetched (a soak run makes thousands of prompts whose images nobody
 * fetches) and kept in a small cache. `/images/<prompt id>-<index>.png` shows the prompt's size and seed; ids of pack
 * prompts (pack covers) and other names (demo training images) are drawn at their own or a default size.
 */
import { promptImage, type ImageFacts } from './png';
import type { Store } from './store';

/** The service's usual size when a prompt names none. */
const DEFAULT_SIDE = 512;
/** Recently drawn images kept: a gallery page or a demo fetches each image once or twice in a row. */
const CACHE_SIZE = 32;

/** Draws and caches the mock's generated images. */
export class ImageMaker {
  private readonly cache = new Map<string, Buffer>();

  constructor(private readonly store: Store) {}

  /**
   * The PNG for an image name such as `123-0.png`, or undefined when the name is not one the mock serves.
   * @example imageMaker.png('123-0.png')
   */
  png(name: string): Buffer | undefined {
    if (!/^[\w.-]{1,100}$/.test(name) || !name.endsWith('.png')) return undefined;
    const facts = this.facts(name.slice(0, -4));
    const key = JSON.stringify(facts);
    let bytes = this.cache.get(key);
    if (bytes) {
      // Most recently used last.
      this.cache.delete(key);
    } else {
      bytes = promptImage(facts);
      if (this.cache.size >= CACHE_SIZE) this.cache.delete(this.cache.keys().next().value as string);
    }
    this.cache.set(key, bytes);
    return bytes;
  }

  private facts(stem: string): ImageFacts {
    const match = /^(\d{1,15})-(\d{1,3})$/.exec(stem);
    if (!match) {
      // Not a prompt's image (e.g. `training-1`): a stable picture titled by its name.
      const id = [...stem].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 1_000_000_007, 7);
      return {
        width: DEFAULT_SIDE,
        height: DEFAULT_SIDE,
        promptId: id,
        index: 0,
        seed: null,
        title: stem.toUpperCase(),
      };
    }
    const promptId = Number(match[1]);
    const index = Number(match[2]);
    const attributes = this.store.prompts.get(promptId)?.attributes ?? this.packPrompt(promptId);
    return {
      width: side(attributes?.w),
      height: side(attributes?.h),
      promptId,
      index,
      seed: seedOf(attributes?.seed),
    };
  }

  private packPrompt(id: number): Record<string, unknown> | undefined {
    for (const pack of this.store.packs.values())
      for (const prompts of Object.values(pack.prompts_per_class)) {
        const found = prompts.find((p) => p.id === id);
        if (found) return { ...found };
      }
    return undefined;
  }
}

/** A side as the prompt asked it (multipart sends numbers as strings), else the default. */
function side(value: unknown): number {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : DEFAULT_SIDE;
}

function seedOf(value: unknown): number | null {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : null;
}
