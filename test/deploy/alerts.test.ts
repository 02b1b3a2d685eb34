/**
 * tuneflow's alert rules and Grafana dashboard, checked by Prometheus's own promtool (provisioned as Temporal is, see
 * promtool.ts; no skip): the rules load, their unit tests (deploy/prometheus/tuneflow-alerts.test.yml) pass and prove
 * each alert both fires and stays quiet, every panel's query is PromQL Prometheus takes, and docker compose's
 * `metrics` profile loads the rules into Prometheus and the dashboard into Grafana. That every metric they name is on a
 * real worker's /metrics is test/workflows/dashboard-metrics.test.ts. The README's "Dashboard and alerts" commands run
 * here as printed, promtool being the one provisioned.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse, stringify } from 'yaml';
import { alertRules, asPromQL, DASHBOARD, dashboard, metricNamesOf, panels, RULE_TESTS, RULES } from './observability';
import { promtool, provisionPromtool, type Promtool } from './promtool';
import { blocksUnder, commandsOf } from '../readme-blocks';

// Long enough for the slowest way of provisioning promtool, a build from its Go module on a loaded machine.
jest.setTimeout(40 * 60_000);

const ROOT = path.resolve(__dirname, '../..');
let tool: Promtool;
let scratch: string;

beforeAll(async () => {
  tool = await provisionPromtool(process.env, (line) => process.stderr.write(`promtool: ${line}\n`));
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-alerts-'));
});

afterAll(() => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

const ALERTS = [
  'TuneflowServiceRateLimiting',
  'TuneflowJobsFailing',
  'TuneflowServiceErrors',
  'TuneflowCallbacksRefused',
  'TuneflowSpendPerHourHigh',
  'TuneflowNoWorkerPolling',
];

describe('the alert rules', () => {
  test('are the alerts an operator watches, each with a severity, a summary and a description', () => {
    const rules = alertRules();
    expect(rules.map((r) => r.alert)).toEqual(ALERTS);
    for (const rule of rules) {
      expect([rule.alert, rule.labels?.severity]).toEqual([rule.alert, expect.stringMatching(/^(warning|critical)$/)]);
      expect(Object.keys(rule.annotations ?? {}).sort()).toEqual(['description', 'summary']);
    }
  });

  test('pass `promtool check rules`', async () => {
    const { code, output } = await promtool(tool.executable, ['check', 'rules', RULES]);
    expect({ code, output, source: tool.source }).toEqual({
      code: 0,
      output: expect.stringContaining(`SUCCESS: ${ALERTS.length} rules found`),
      source: tool.source,
    });
  });

  test('pass their unit tests (`promtool test rules`), which prove each alert fires and each stays quiet', async () => {
    const { code, output } = await promtool(
      tool.executable,
      ['test', 'rules', path.basename(RULE_TESTS)],
      path.dirname(RULE_TESTS),
    );
    expect({ code, output }).toEqual({ code: 0, output: expect.stringContaining('SUCCESS') });
    const cases = (
      parse(fs.readFileSync(RULE_TESTS, 'utf8')) as {
        tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
      }
    ).tests.flatMap((t) => t.alert_rule_test);
    for (const alert of ALERTS) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect({
        alert,
        fires: mine.some((c) => c.exp_alerts.length > 0),
        quiet: mine.some((c) => !c.exp_alerts.length),
      }).toEqual({
        alert,
        fires: true,
        quiet: true,
      });
    }
  });

  test('and promtool fails a broken rule, so a pass above means something', async () => {
    const broken = path.join(scratch, 'broken.yml');
    fs.writeFileSync(
      broken,
      stringify({ groups: [{ name: 'x', rules: [{ alert: 'X', expr: 'sum(rate(tuneflow_callbacks_total[5m])' }] }] }),
    );
    const { code, output } = await promtool(tool.executable, ['check', 'rules', broken]);
    expect(code).not.toBe(0);
    expect(output).toMatch(/FAILED/);
  });
});

describe('the Grafana dashboard', () => {
  test('has a panel for each thing an operator watches, every query on the Prometheus data source variable', () => {
    const board = dashboard();
    expect(board.uid).toBe('tuneflow');
    expect(board.templating.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }),
    );
    const queried = panels(board).filter((p) => p.type !== 'row');
    for (const panel of queried) {
      expect([panel.title, panel.datasource]).toEqual([panel.title, { type: 'prometheus', uid: '${datasource}' }]);
      expect(panel.targets?.length).toBeGreaterThan(0);
    }
    const reads = (name: string) =>
      queried.filter((p) => p.targets!.some((t) => metricNamesOf(asPromQL(t.expr)).includes(name))).map((p) => p.title);
    // Rate limiting, failures by type, callbacks, spend, polling: each on some panel.
    for (const name of [
      'tuneflow_service_rate_limited_total',
      'tuneflow_jobs_total',
      'temporal_workflow_failed',
      'temporal_activity_execution_failed',
      'tuneflow_callbacks_total',
      'tuneflow_charged_millicents_total',
      'temporal_num_pollers',
      'up',
    ])
      expect([name, reads(name).length > 0]).toEqual([name, true]);
  });

  test("every panel's query is PromQL that promtool takes", async () => {
    const rules = panels()
      .flatMap((p) => (p.targets ?? []).map((t) => ({ p, t })))
      .map(({ p, t }, i) => ({ record: `tuneflow:panel_${i}`, expr: asPromQL(t.expr), labels: { panel: p.title } }));
    expect(rules.length).toBeGreaterThan(10);
    const file = path.join(scratch, 'panels.yml');
    fs.writeFileSync(file, stringify({ groups: [{ name: 'panels', rules }] }));
    const { code, output } = await promtool(tool.executable, ['check', 'rules', file]);
    expect({ code, output }).toEqual({
      code: 0,
      output: expect.stringContaining(`SUCCESS: ${rules.length} rules found`),
    });
  });
});

test('the metric names read from an expression: no function, label, keyword, duration or string', () => {
  expect(
    metricNamesOf(
      'sum by (operation) (rate(tuneflow_service_requests_total{status_class=~"5xx|none"}[10m])) / ignoring(operation) group_left sum(rate(x_total[5m] offset 1h)) > 0.1 or absent(up{job="a"} == 1) or vector(0) * on(le) histogram_quantile(0.9, y_bucket)',
    ),
  ).toEqual(['tuneflow_service_requests_total', 'up', 'x_total', 'y_bucket']);
});

describe("docker compose's metrics profile", () => {
  interface Service {
    image?: string;
    profiles?: string[];
    configs?: Array<{ source: string; target: string }>;
    ports?: string[];
    environment?: Record<string, string>;
    depends_on?: Record<string, { condition: string }>;
  }
  const compose = parse(fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, Service>;
    configs: Record<string, { content?: string; file?: string }>;
  };
  /** Where a service finds each config file: its target, to the file's text. */
  const mounted = (service: Service) =>
    Object.fromEntries(
      (service.configs ?? []).map(({ source, target }) => {
        const config = compose.configs[source];
        return [target, config.content ?? fs.readFileSync(path.join(ROOT, config.file!), 'utf8')];
      }),
    );

  test("Prometheus loads tuneflow's alert rules, and `promtool check config` takes its configuration", async () => {
    const prometheus = compose.services.prometheus;
    const files = mounted(prometheus);
    const config = parse(files['/etc/prometheus/prometheus.yml']) as {
      rule_files: string[];
      scrape_configs: Array<{ job_name: string }>;
    };
    expect(config.rule_files.map((f) => files[f])).toEqual([fs.readFileSync(RULES, 'utf8')]);
    // The rules' `up{job=...}` is the job that scrapes the workers.
    const jobs = alertRules().flatMap((r) => [...r.expr.matchAll(/up\{job="([^"]+)"\}/g)].map((m) => m[1]));
    expect(jobs.length).toBeGreaterThan(0);
    for (const job of jobs) expect(config.scrape_configs.map((c) => c.job_name)).toContain(job);
    // Checked as Prometheus would read it, with the rules where it mounts them.
    const here = path.join(scratch, 'prometheus.yml');
    fs.writeFileSync(here, stringify({ ...config, rule_files: [RULES] }));
    const { code, output } = await promtool(tool.executable, ['check', 'config', here]);
    expect({ code, output }).toEqual({ code: 0, output: expect.stringContaining('SUCCESS') });
  });

  test('Grafana shows the dashboard over that Prometheus', () => {
    const grafana = compose.services.grafana;
    expect(grafana.profiles).toEqual(['metrics']);
    expect(grafana.image).toMatch(/^grafana\/grafana:\d+\.\d+\.\d+$/);
    expect(grafana.depends_on).toEqual({ prometheus: { condition: 'service_started' } });
    const files = mounted(grafana);
    const sources = parse(files['/etc/grafana/provisioning/datasources/tuneflow.yml']) as {
      datasources: Array<{ type: string; url: string; isDefault?: boolean }>;
    };
    // Inside the network: Prometheus's service name and the port it listens on.
    const [prometheusPort] = compose.services.prometheus.ports!.map((p) => p.split(':').pop());
    expect(sources.datasources).toEqual([
      expect.objectContaining({ type: 'prometheus', url: `http://prometheus:${prometheusPort}`, isDefault: true }),
    ]);
    const providers = parse(files['/etc/grafana/provisioning/dashboards/tuneflow.yml']) as {
      providers: Array<{ type: string; options: { path: string } }>;
    };
    expect(providers.providers).toEqual([expect.objectContaining({ type: 'file' })]);
    const folder = providers.providers[0].options.path;
    const boards = Object.keys(files).filter((target) => path.dirname(target) === folder);
    expect(boards.map((target) => files[target])).toEqual([fs.readFileSync(DASHBOARD, 'utf8')]);
    expect(grafana.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(boards[0]);
    expect(grafana.ports).toEqual(['3000:3000']);
  });
});

test("the README's Dashboard and alerts commands run as printed, from the repository's root", async () => {
  const commands = blocksUnder('### Dashboard and alerts', 'sh').flatMap(commandsOf);
  expect(commands.length).toBe(2);
  for (const command of commands) {
    const [program, ...args] = command.split(/\s+/);
    expect(program).toBe('promtool');
    const { code, output } = await promtool(tool.executable, args, ROOT);
    expect({ command, code, output }).toEqual({ command, code: 0, output: expect.stringContaining('SUCCESS') });
  }
});
