/**
 * `npm run soak -- --report DIR`: a page to look at, not read. Hand-written SVG (no chart library): worker memory and
 * runs in flight over time, and how fast runs reacted to callbacks, tuneflow beside the floor when compared. Each chart
 * is also written as its own .svg file, small enough to commit beside a README.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Sample } from './measure';

/** One line or one set of bars. */
export interface Series {
  name: string;
  color: string;
}

export const TUNEFLOW_COLOR = '#c2410c';
export const FLOOR_COLOR = '#2563eb';

const WIDTH = 640;
const HEIGHT = 280;
const MARGIN = { left: 64, right: 16, top: 40, bottom: 44 };
const PLOT = { w: WIDTH - MARGIN.left - MARGIN.right, h: HEIGHT - MARGIN.top - MARGIN.bottom };

/** Text for XML: names come from the run. */
export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/**
 * Round steps for an axis from 0 to at least `max`: 1, 2 or 5 times a power of ten, about five of them.
 *
 * @example
 * axisTicks(93); // [0, 20, 40, 60, 80, 100]
 */
export function axisTicks(max: number): number[] {
  if (!(max > 0)) return [0, 1];
  const rough = max / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) as number;
  const ticks: number[] = [];
  for (let v = 0; v < max + step; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

const label = (n: number) => (Math.abs(n) >= 10_000 ? `${Math.round(n / 1000)}k` : String(n));

function frame(title: string, body: string, legend: readonly Series[]): string {
  const keys = legend
    .map(
      (s, i) =>
        `<rect x="${MARGIN.left + i * 140}" y="24" width="12" height="4" fill="${s.color}"/>` +
        `<text x="${MARGIN.left + 16 + i * 140}" y="30">${escapeXml(s.name)}</text>`,
    )
    .join('');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" ` +
    `font-family="system-ui, sans-serif" font-size="11" fill="#222">` +
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#fff"/>` +
    `<text x="${MARGIN.left}" y="14" font-size="13" font-weight="600">${escapeXml(title)}</text>${keys}${body}</svg>`
  );
}

function yAxis(ticks: readonly number[], unit: string): string {
  const top = ticks[ticks.length - 1];
  return (
    ticks
      .map((v) => {
        const y = MARGIN.top + PLOT.h - (v / top) * PLOT.h;
        return (
          `<line x1="${MARGIN.left}" x2="${MARGIN.left + PLOT.w}" y1="${y}" y2="${y}" stroke="#e5e5e5"/>` +
          `<text x="${MARGIN.left - 6}" y="${y + 4}" text-anchor="end">${label(v)}</text>`
        );
      })
      .join('') +
    `<text transform="translate(14 ${MARGIN.top + PLOT.h / 2}) rotate(-90)" text-anchor="middle">${escapeXml(unit)}</text>`
  );
}

/**
 * Lines over a shared x axis from 0.
 *
 * @example
 * lineChart('Worker RSS', 'MiB', 'seconds', [{ name: 'tuneflow', color: 'red', points: [[0, 80], [1, 120]] }]);
 */
export function lineChart(
  title: string,
  yUnit: string,
  xUnit: string,
  series: ReadonlyArray<Series & { points: ReadonlyArray<readonly [number, number]> }>,
): string {
  const points = series.flatMap((s) => s.points);
  if (points.length === 0) return frame(title, `<text x="${WIDTH / 2}" y="${HEIGHT / 2}">no samples</text>`, series);
  const xTicks = axisTicks(Math.max(...points.map(([x]) => x)));
  const yTicks = axisTicks(Math.max(...points.map(([, y]) => y)));
  const [xMax, yMax] = [xTicks[xTicks.length - 1], yTicks[yTicks.length - 1]];
  const at = ([x, y]: readonly [number, number]) =>
    `${(MARGIN.left + (x / xMax) * PLOT.w).toFixed(1)},${(MARGIN.top + PLOT.h - (y / yMax) * PLOT.h).toFixed(1)}`;
  const xAxis = xTicks
    .map((v) => {
      const x = MARGIN.left + (v / xMax) * PLOT.w;
      return `<text x="${x}" y="${MARGIN.top + PLOT.h + 16}" text-anchor="middle">${label(v)}</text>`;
    })
    .join('');
  const lines = series
    .map(
      (s) =>
        `<polyline fill="none" stroke="${s.color}" stroke-width="2" stroke-linejoin="round" ` +
        `points="${s.points.map(at).join(' ')}"/>`,
    )
    .join('');
  const xName = `<text x="${MARGIN.left + PLOT.w / 2}" y="${HEIGHT - 6}" text-anchor="middle">${escapeXml(xUnit)}</text>`;
  return frame(title, yAxis(yTicks, yUnit) + xAxis + xName + lines, series);
}

/**
 * Bars side by side per category (one per series).
 *
 * @example
 * barChart('Reaction', '% of reactions', 'ms', ['<50', '50-100'], [{ name: 'tuneflow', color: 'red', values: [90, 10] }]);
 */
export function barChart(
  title: string,
  yUnit: string,
  xUnit: string,
  categories: readonly string[],
  series: ReadonlyArray<Series & { values: readonly number[] }>,
): string {
  const values = series.flatMap((s) => s.values);
  if (values.length === 0) return frame(title, `<text x="${WIDTH / 2}" y="${HEIGHT / 2}">no data</text>`, series);
  const yTicks = axisTicks(Math.max(...values));
  const yMax = yTicks[yTicks.length - 1];
  const slot = PLOT.w / categories.length;
  const bar = (slot * 0.8) / series.length;
  const xName = `<text x="${MARGIN.left + PLOT.w / 2}" y="${HEIGHT - 6}" text-anchor="middle">${escapeXml(xUnit)}</text>`;
  const bars = categories
    .map((category, c) => {
      const x0 = MARGIN.left + c * slot + slot * 0.1;
      const rects = series
        .map((s, i) => {
          const h = ((s.values[c] ?? 0) / yMax) * PLOT.h;
          return (
            `<rect x="${(x0 + i * bar).toFixed(1)}" y="${(MARGIN.top + PLOT.h - h).toFixed(1)}" ` +
            `width="${(bar - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${s.color}"/>`
          );
        })
        .join('');
      const name = `<text x="${(x0 + slot * 0.4).toFixed(1)}" y="${MARGIN.top + PLOT.h + 16}" text-anchor="middle">${escapeXml(category)}</text>`;
      return rects + name;
    })
    .join('');
  return frame(title, yAxis(yTicks, yUnit) + xName + bars, series);
}

/** Latency buckets, in ms: wide enough to show a 2 s gathering wait and a burst's seconds. */
export const REACTION_BUCKETS = [25, 50, 100, 200, 500, 1_000, 2_000, 5_000] as const;

/**
 * The share of reactions (percent) in each bucket: below 25 ms, 25 to 50, ..., 5 s and more.
 *
 * @example
 * reactionShares([10, 30, 30, 6_000]); // [25, 50, 0, 0, 0, 0, 0, 0, 25]
 */
export function reactionShares(ms: readonly number[]): number[] {
  const counts = new Array<number>(REACTION_BUCKETS.length + 1).fill(0);
  for (const value of ms) {
    const i = REACTION_BUCKETS.findIndex((limit) => value < limit);
    counts[i === -1 ? REACTION_BUCKETS.length : i]++;
  }
  return counts.map((n) => (ms.length ? Math.round((1000 * n) / ms.length) / 10 : 0));
}

export function reactionBucketNames(): string[] {
  const name = (ms: number) => (ms >= 1000 ? `${ms / 1000} s` : `${ms}`);
  return [
    `<${name(REACTION_BUCKETS[0])}`,
    ...REACTION_BUCKETS.slice(1).map((limit, i) => `${name(REACTION_BUCKETS[i])}-${name(limit)}`),
    `≥${name(REACTION_BUCKETS[REACTION_BUCKETS.length - 1])}`,
  ];
}

/** What one run (tuneflow's or the floor's) gives the charts. */
export interface ChartedRun {
  name: string;
  color: string;
  samples: readonly Sample[];
  reactionMs: readonly number[];
}

/**
 * The three charts of a report.
 *
 * @example
 * const { rss, inFlight, reactions } = reportCharts([{ name: 'tuneflow', color, samples, reactionMs }]);
 */
export function reportCharts(runs: readonly ChartedRun[]): { rss: string; inFlight: string; reactions: string } {
  const over = (pick: (s: Sample) => number) =>
    runs.map((r) => ({ ...r, points: r.samples.map((s) => [s.t, Math.round(pick(s))] as const) }));
  return {
    rss: lineChart(
      'Worker resident memory',
      'MiB',
      'seconds since the first start',
      over((s) => s.rssMiB),
    ),
    inFlight: lineChart(
      'Runs in flight',
      'runs',
      'seconds since the first start',
      over((s) => s.inFlight),
    ),
    reactions: barChart(
      'Callback to reaction',
      '% of reactions',
      "milliseconds from the service's callback to the run's next command",
      reactionBucketNames(),
      runs.map((r) => ({ ...r, values: reactionShares(r.reactionMs) })),
    ),
  };
}

/**
 * The page: a heading, the figures as a small table (`rows`: name, then one cell per run, then the ratio when
 * compared), the charts inline. Self-contained: no script, no external resource.
 *
 * @example
 * reportPage('npm run soak -- --jobs 1000 --compare-floor', ['', 'tuneflow', 'floor', 'ratio'], rows, charts);
 */
export function reportPage(
  title: string,
  head: readonly string[],
  rows: ReadonlyArray<readonly string[]>,
  charts: readonly string[],
): string {
  const cells = (row: readonly string[], tag: string) => row.map((c) => `<${tag}>${escapeXml(c)}</${tag}>`).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeXml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}
td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left;white-space:nowrap}
figure{margin:16px 0}</style></head><body>
<h1 style="font-size:18px">${escapeXml(title)}</h1>
<table><thead><tr>${cells(head, 'th')}</tr></thead><tbody>
${rows.map((row) => `<tr>${cells(row, 'td')}</tr>`).join('\n')}
</tbody></table>
${charts.map((svg) => `<figure>${svg}</figure>`).join('\n')}
</body></html>
`;
}

/**
 * Writes `dir`/index.html, each chart as `dir`/<name>.svg and the whole report as `dir`/report.json.
 *
 * @example
 * writeReportPage('out/soak', title, head, rows, runs, report);
 */
export function writeReportPage(
  dir: string,
  title: string,
  head: readonly string[],
  rows: ReadonlyArray<readonly string[]>,
  runs: readonly ChartedRun[],
  report: unknown,
): string {
  fs.mkdirSync(dir, { recursive: true });
  const charts = reportCharts(runs);
  for (const [name, svg] of Object.entries(charts)) fs.writeFileSync(path.join(dir, `${name}.svg`), `${svg}\n`);
  const page = path.join(dir, 'index.html');
  fs.writeFileSync(page, reportPage(title, head, rows, Object.values(charts)));
  fs.writeFileSync(path.join(dir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  return page;
}
