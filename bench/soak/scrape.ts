/**
 * A process's `/metrics` (Prometheus's text format) read as samples: what the soak compares with the mock service's
 * journal, and the metrics tests with the runs' histories. A process's counters start at 0 with it, so a test
 * compares them as increases between two scrapes, and the soak sums each process's last scrape.
 */
import { request } from 'undici';

/** A scrape as counters: `name{labels}` summed over the samples that match. */
export class Scrape {
  private readonly samples: Array<{ name: string; labels: Record<string, string>; value: number }> = [];

  constructor(readonly text: string) {
    for (const line of text.split('\n')) {
      const match = line.match(/^(\w+)(?:\{(.*)\})? (\S+)$/);
      if (!match) continue;
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      this.samples.push({ name: match[1], labels, value: Number(match[3]) });
    }
  }

  /** The sum of `name`'s samples whose labels include `where` (0 before the counter's first use). */
  total(name: string, where: Record<string, string> = {}): number {
    return this.samples
      .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
      .reduce((sum, s) => sum + s.value, 0);
  }

  /** The values `label` takes among `name`'s samples. */
  values(name: string, label: string): string[] {
    return [...new Set(this.samples.filter((s) => s.name === name).map((s) => s.labels[label]))].sort();
  }
}

/** The `/metrics` of the process listening on `target` (a port on 127.0.0.1, or a URL), now. */
export async function scrape(target: number | string): Promise<Scrape> {
  const url = typeof target === 'number' ? `http://127.0.0.1:${target}/metrics` : target;
  const { statusCode, body } = await request(url);
  const text = await body.text();
  if (statusCode !== 200) throw new Error(`${url} answered ${statusCode}`);
  return new Scrape(text);
}

/** What `name{where}` rose by from `before` to `after`. */
export const rise = (before: Scrape, after: Scrape, name: string, where: Record<string, string> = {}): number =>
  after.total(name, where) - before.total(name, where);
