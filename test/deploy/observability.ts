/**
 * tuneflow's alert rules and Grafana dashboard as the tests read them: every PromQL expression in them, and the metric
 * names each one reads, so a test can hold those names against a real scrape of a worker's /metrics.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';

const ROOT = path.resolve(__dirname, '../..');
export const RULES = path.join(ROOT, 'deploy', 'prometheus', 'tuneflow-alerts.yml');
export const RULE_TESTS = path.join(ROOT, 'deploy', 'prometheus', 'tuneflow-alerts.test.yml');
export const DASHBOARD = path.join(ROOT, 'deploy', 'grafana', 'tuneflow.json');

/** Series Prometheus makes itself for each target, which no /metrics serves. */
export const MADE_BY_PROMETHEUS = ['up'];

export interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function alertRules(): Rule[] {
  const file = parse(fs.readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> };
  return file.groups.flatMap((g) => g.rules);
}

export interface Panel {
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<{ expr: string; refId: string; datasource?: { type: string; uid: string } }>;
  panels?: Panel[];
}

export interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: string }> };
}

export function dashboard(): Dashboard {
  return JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as Dashboard;
}

/** Every panel of the dashboard, those inside rows too. */
export function panels(board: Dashboard = dashboard()): Panel[] {
  return board.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** A panel's query as Prometheus gets it: Grafana's `$__rate_interval` is a range of at least 4 scrapes. */
export function asPromQL(expr: string): string {
  return expr.replace(/\$__rate_interval/g, '1m');
}

/** Every PromQL expression: `rule <alert>` or `panel <title> <refId>` to each. */
export function expressions(): Array<{ where: string; expr: string }> {
  return [
    ...alertRules().map((r) => ({ where: `rule ${r.alert}`, expr: r.expr })),
    ...panels().flatMap((p) =>
      (p.targets ?? []).map((t) => ({ where: `panel ${p.title} ${t.refId}`, expr: asPromQL(t.expr) })),
    ),
  ];
}

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/**
 * The metric names a PromQL expression reads: identifiers that are no function (followed by `(`), keyword, label
 * (inside `{...}` or a grouping's `(...)`), string, duration or number. Enough for the expressions tuneflow ships;
 * a name in `{__name__="..."}` is not one it writes.
 */
export function metricNamesOf(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = [...bare.matchAll(/(?<![\w:.])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()/g)]
    .map((m) => m[1])
    .filter((name) => !KEYWORDS.has(name.toLowerCase()) && !/^\d/.test(name));
  return [...new Set(names)].sort();
}

/** Every metric name the rules and the dashboard read, each with where. */
export function metricsUsed(): Map<string, string[]> {
  const used = new Map<string, string[]>();
  for (const { where, expr } of expressions())
    for (const name of metricNamesOf(expr)) used.set(name, [...(used.get(name) ?? []), where]);
  return used;
}

/** The metric names a scrape (Prometheus's text format) has samples of. */
export function scrapedNames(text: string): Set<string> {
  return new Set(
    text
      .split('\n')
      .filter((line) => line && !line.startsWith('#'))
      .map((line) => /^[a-zA-Z_:][\w:]*/.exec(line)?.[0])
      .filter((name): name is string => Boolean(name)),
  );
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
}

/** A scrape's samples (Prometheus's text format), names and labels. */
export function samplesOf(text: string): Sample[] {
  return text.split('\n').flatMap((line) => {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$/.exec(line);
    if (!match) return [];
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    return [{ name: match[1], labels }];
  });
}

/** The label values an expression's selectors insist on (`name{label="v"}`, `=~` too), and the labels it groups by. */
export function labelsOf(expr: string): {
  matchers: Array<{ name: string; label: string; op: '=' | '=~'; value: string }>;
  grouping: string[];
} {
  const matchers = [...expr.matchAll(/([a-zA-Z_:][\w:]*)\{([^}]*)\}/g)].flatMap(([, name, inside]) =>
    [...inside.matchAll(/(\w+)\s*(=~|=)\s*"([^"]*)"/g)].map(([, label, op, value]) => ({
      name,
      label,
      op: op as '=' | '=~',
      value,
    })),
  );
  const grouping = [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap(([, inside]) =>
    inside
      .split(',')
      .map((l) => l.trim())
      .filter(Boolean),
  );
  return { matchers, grouping: [...new Set(grouping)] };
}
