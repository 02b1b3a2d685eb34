/**
 * The report page's charts, written by hand as SVG: axes on round numbers, one line or bar per series and value,
 * names escaped, a page with nothing to fetch.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  axisTicks,
  barChart,
  escapeXml,
  lineChart,
  reactionBucketNames,
  reactionShares,
  reportCharts,
  reportPage,
  writeReportPage,
} from '../../bench/soak/charts';

const count = (text: string, pattern: RegExp) => (text.match(pattern) ?? []).length;

test('axes run from 0 in round steps past the largest value', () => {
  expect(axisTicks(93)).toEqual([0, 20, 40, 60, 80, 100]);
  expect(axisTicks(3_145)).toEqual([0, 1_000, 2_000, 3_000, 4_000]);
  expect(axisTicks(0.7)).toEqual([0, 0.2, 0.4, 0.6, 0.8]);
  expect(axisTicks(0)).toEqual([0, 1]);
});

test('reaction shares: the percentage of reactions in each bucket, the last open-ended', () => {
  expect(reactionShares([10, 30, 30, 6_000])).toEqual([25, 50, 0, 0, 0, 0, 0, 0, 25]);
  expect(reactionShares([])).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0]);
  expect(reactionBucketNames()).toEqual([
    '<25',
    '25-50',
    '50-100',
    '100-200',
    '200-500',
    '500-1 s',
    '1 s-2 s',
    '2 s-5 s',
    '≥5 s',
  ]);
});

test('a line chart: one polyline per series, its points in the plot, names escaped', () => {
  const svg = lineChart('Worker <RSS>', 'MiB', 'seconds', [
    {
      name: 'tune & flow',
      color: '#c00',
      points: [
        [0, 100],
        [10, 300],
        [20, 250],
      ],
    },
    {
      name: 'floor',
      color: '#00c',
      points: [
        [0, 90],
        [20, 120],
      ],
    },
  ]);
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  expect(count(svg, /<polyline /g)).toBe(2);
  const [first] = [...svg.matchAll(/points="([^"]+)"/g)].map((m) => m[1].split(' '));
  expect(first).toHaveLength(3);
  // x from the left margin to the right end of the plot, y from its bottom (0) up.
  // The plot is 560 by 196 from (64, 40); the axes reach 20 s and 300 MiB.
  expect(first[0]).toBe('64.0,170.7');
  expect(first[1]).toBe('344.0,40.0');
  expect(svg).toContain('Worker &lt;RSS&gt;');
  expect(svg).toContain('tune &amp; flow');
  expect(svg).not.toContain('tune & flow');
  expect(lineChart('Empty', 'MiB', 's', [{ name: 'a', color: '#000', points: [] }])).toContain('no samples');
});

test('a bar chart: one bar per series and category, heights to scale', () => {
  const svg = barChart(
    'Reactions',
    '%',
    'ms',
    ['<25', '25-50', '≥50'],
    [
      { name: 'tuneflow', color: '#c00', values: [50, 50, 0] },
      { name: 'floor', color: '#00c', values: [100, 0, 0] },
    ],
  );
  // Legend keys sit at y 24; the rest are the bars, category by category, 196 high at 100 %.
  const bars = [...svg.matchAll(/<rect x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)"/g)]
    .filter((m) => m[1] !== '24')
    .map((m) => Number(m[2]));
  expect(bars).toEqual([98, 196, 98, 0, 0, 0]);
  expect(svg).toContain('≥50');
});

test('the page holds its charts inline and fetches nothing', () => {
  const charts = reportCharts([
    { name: 'tuneflow', color: '#c00', samples: [{ t: 1, rssMiB: 300.4, inFlight: 20 }], reactionMs: [40, 120] },
    { name: 'floor', color: '#00c', samples: [{ t: 1, rssMiB: 200, inFlight: 20 }], reactionMs: [30] },
  ]);
  const page = reportPage(
    'soak <1000>',
    ['', 'tuneflow', 'floor', 'ratio'],
    [['worker CPU', '30 ms', '20 ms', '1.5x']],
    [charts.rss, charts.inFlight, charts.reactions],
  );
  expect(count(page, /<svg /g)).toBe(3);
  expect(page).toContain('<title>soak &lt;1000&gt;</title>');
  expect(page).toContain('<td>1.5x</td>');
  expect(page).not.toMatch(/<script|<link|src=|href=/);
  expect(page.replace(/xmlns="http:\/\/www\.w3\.org\/2000\/svg"/g, '')).not.toContain('http');
});

test('writeReportPage: index.html, each chart as an .svg, the report as JSON', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-charts-'));
  try {
    const page = writeReportPage(
      dir,
      'soak',
      ['', 'tuneflow'],
      [['jobs/s', '15']],
      [{ name: 'tuneflow', color: '#c00', samples: [{ t: 1, rssMiB: 10, inFlight: 1 }], reactionMs: [5] }],
      { jobs: 1 },
    );
    expect(page).toBe(path.join(dir, 'index.html'));
    expect(fs.readdirSync(dir).sort()).toEqual([
      'inFlight.svg',
      'index.html',
      'reactions.svg',
      'report.json',
      'rss.svg',
    ]);
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'report.json'), 'utf8'))).toEqual({ jobs: 1 });
    expect(fs.readFileSync(path.join(dir, 'rss.svg'), 'utf8')).toMatch(/^<svg [^]*<\/svg>\n$/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('escapeXml', () => {
  expect(escapeXml('a<b & "c">')).toBe('a&lt;b &amp; &quot;c&quot;&gt;');
});
