/**
 * Callers in any language start tuneflow by name with JSON (issue 19 item 4), shown with the Temporal CLI the project
 * provisions, on a dev server: documents the published input schema accepts (checked by a pinned JSON Schema
 * validator, ajv) start runs that complete against the mock service; documents the schema refuses, started all the
 * same, are refused by the workflow naming the same fields as the schema's errors, with no activity in their
 * histories and no request to the service.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { WorkflowFailedError } from '@temporalio/client';
import Ajv2020 from 'ajv/dist/2020';
import { ApplicationFailure } from '@temporalio/common';
import { TunesApi } from '../../src/api';
import { FailureType } from '../../src/contract/failures';
import type { GenerateResult, TrainThenGenerateResult } from '../../src/contract/inputs';
import { inputSchema } from '../../src/contract/input-schema';
import type { WorkflowName } from '../../src/contract/jobs';
import { schemaVerdict } from '../contract/input-schema-verdict';
import { devServerExecutable, devServerTest } from './environment';
import { API_KEY } from './harness';
import { summarize } from './history-summary';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { NexusWorld, TUNEFLOW_NAMESPACE, TUNEFLOW_TASK_QUEUE } from './nexus-world';

jest.setTimeout(180_000);

const ROOT = path.resolve(__dirname, '../..');

let world: NexusWorld | undefined;
beforeAll(async () => {
  world = await NexusWorld.open(devServerExecutable());
}, 180_000);
afterAll(async () => {
  await world?.close();
});

/** `temporal workflow start --type <workflow> --input '<document>'`, as a script in any language would. */
async function startWithCli(workflow: WorkflowName, workflowId: string, document: unknown): Promise<string> {
  const { stdout } = await world!.cliRun([
    ...['workflow', 'start', '--namespace', TUNEFLOW_NAMESPACE, '--task-queue', TUNEFLOW_TASK_QUEUE],
    ...['--type', workflow, '--workflow-id', workflowId, '--input', JSON.stringify(document)],
  ]);
  return stdout;
}

/** The failure type of a failed run and the fields it names: InvalidInput's issues, or InvalidOptions' option. */
async function refusal(workflowId: string): Promise<{ type?: string; fields: string[] }> {
  const err = await world!.images.workflow
    .getHandle(workflowId)
    .result()
    .then(
      () => new Error(`${workflowId} completed: the workflow took a document the schema refuses`),
      (e: unknown) => e,
    );
  if (!(err instanceof WorkflowFailedError) || !(err.cause instanceof ApplicationFailure)) throw err;
  const details = err.cause.details?.[0] as { issues?: Array<{ field: string }>; option?: string };
  const fields = details.issues?.map((i) => i.field) ?? [`options.${details.option}`];
  return { type: err.cause.type ?? undefined, fields: [...new Set(fields)].sort() };
}

const activitiesOf = async (workflowId: string) =>
  summarize(await world!.images.workflow.getHandle(workflowId).fetchHistory()).activities;

/** Documents the schema refuses, each with the fields both sides name and the workflow's failure type. */
function refusedDocuments(imageUrl: string) {
  const tune = { name: 'dog', image_urls: [imageUrl] };
  const prompt = { text: 'sks dog' };
  return [
    {
      why: 'a URL that is not http(s)',
      workflow: 'trainThenGenerate',
      document: { tune: { name: 'dog', image_urls: ['ftp://example.com/1.jpg'] }, prompts: [prompt] },
      fields: ['tune.image_urls[0]'],
    },
    {
      why: 'no name for the new tune',
      workflow: 'trainThenGenerate',
      document: { tune: { image_urls: [imageUrl] }, prompts: [] },
      fields: ['tune.name'],
    },
    {
      why: 'both image sources (a rule between two attributes)',
      workflow: 'trainThenGenerate',
      document: { tune: { ...tune, images: ['/photos/1.jpg'] }, prompts: [] },
      fields: ['tune.image_urls'],
    },
    {
      why: 'a Flux LoRA preset without model_type lora',
      workflow: 'trainThenGenerate',
      document: { tune: { ...tune, preset: 'flux-lora-fast' }, prompts: [] },
      fields: ['tune.preset'],
    },
    {
      why: 'too many images, and inpaint_faces without super_resolution, in two prompts',
      workflow: 'trainThenGenerate',
      document: {
        tune,
        prompts: [
          { ...prompt, num_images: 9 },
          { ...prompt, inpaint_faces: true },
        ],
      },
      fields: ['prompts[0].num_images', 'prompts[1].inpaint_faces'],
    },
    {
      why: 'an option that is no duration',
      workflow: 'trainThenGenerate',
      document: { tune, prompts: [], options: { pollInterval: 'soon' } },
      fields: ['options.pollInterval'],
      type: FailureType.invalidOptions,
    },
    {
      why: 'an option tuneflow does not have',
      workflow: 'generate',
      document: { tuneId: 1, prompts: [prompt], options: { retries: 3 } },
      fields: ['options.retries'],
      type: FailureType.invalidOptions,
    },
    {
      why: 'a tune ID that is no positive integer, and a width no multiple of 8',
      workflow: 'generate',
      document: { tuneId: 0, prompts: [{ ...prompt, w: 500 }] },
      fields: ['prompts[0].w', 'tuneId'],
    },
    {
      why: 'no prompt to generate',
      workflow: 'generate',
      document: { tuneId: 1, prompts: [] },
      fields: ['prompts'],
    },
    {
      why: 'a pack ID as a string',
      workflow: 'packTune',
      document: { packId: '260', tune },
      fields: ['packId'],
    },
    {
      why: 'existing tunes and images at once',
      workflow: 'packTune',
      document: { packId: 260, tune: { ...tune, tune_ids: [12] } },
      fields: ['tune.tune_ids'],
    },
    {
      why: "a pack's prompt attribute that is an object",
      workflow: 'packTune',
      document: { packId: 260, tune: { ...tune, prompt_attributes: { num_images: 2, layout: { rows: [1, 2] } } } },
      fields: ['tune.prompt_attributes.layout'],
    },
    {
      why: 'an attribute named as a property every JavaScript object has',
      workflow: 'trainThenGenerate',
      document: { tune: { ...tune, toString: 'x' }, prompts: [] },
      fields: ['tune.toString'],
    },
  ] satisfies Array<{ why: string; workflow: WorkflowName; document: unknown; fields: string[]; type?: string }>;
}

devServerTest(
  'documents the schema accepts start runs with the Temporal CLI that complete; ones it refuses, the run refuses, naming the same fields',
  async () => {
    await world!.withTuneflow({}, async ({ mock }) => {
      const imageUrl = `${mock.url}/images/training-1.png`;

      // Accepted: a training with a prompt, then prompts on the tune it made.
      const train = {
        tune: { name: 'dog', branch: 'fast', image_urls: [imageUrl] },
        prompts: [{ text: 'sks dog on a beach', num_images: 2 }],
        options: { promptTimeout: '10 minutes' },
      };
      expect(schemaVerdict('trainThenGenerate', train)).toBe('ok');
      const started = await startWithCli('trainThenGenerate', 'cli-train', train);
      expect(started).toContain('cli-train');
      const trained = (await world!.images.workflow.getHandle('cli-train').result()) as TrainThenGenerateResult;
      expect(trained.tune.title).toMatch(/^cli-train#[0-9a-f-]{36}$/);
      expect(trained.prompts.map((p) => p.images?.length)).toEqual([2]);
      const trainActivities = await activitiesOf('cli-train');
      expect(trainActivities.filter((a) => a === 'createTune')).toHaveLength(1);
      expect(trainActivities.filter((a) => a === 'createPrompt')).toHaveLength(1);

      const generate = { tuneId: trained.tune.id, prompts: [{ text: 'sks dog in the snow', w: 512, h: 512 }] };
      expect(schemaVerdict('generate', generate)).toBe('ok');
      await startWithCli('generate', 'cli-generate', generate);
      const generated = (await world!.images.workflow.getHandle('cli-generate').result()) as GenerateResult;
      expect(generated.prompts).toHaveLength(1);
      const generateActivities = await activitiesOf('cli-generate');
      expect(generateActivities).not.toContain('createTune');
      expect(generateActivities.filter((a) => a === 'createPrompt')).toHaveLength(1);
      expect(mock.stats().routes['POST /tunes']).toBe(1);
      expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(2);

      // Refused: the schema's errors and the workflow's failure name the same fields; nothing is asked of the service.
      const routesBefore = { ...mock.stats().routes };
      const documents = refusedDocuments(imageUrl);
      for (const [i, { why, workflow, document, fields, ...expected }] of documents.entries()) {
        const workflowId = `cli-refused-${i}`;
        expect({ why, schema: schemaVerdict(workflow, document) }).toEqual({ why, schema: fields });
        await startWithCli(workflow, workflowId, document);
        expect({ why, workflow: await refusal(workflowId) }).toEqual({
          why,
          workflow: { type: 'type' in expected ? expected.type : FailureType.invalidInput, fields },
        });
        expect({ why, activities: await activitiesOf(workflowId) }).toEqual({ why, activities: [] });
      }
      expect(documents.length).toBeGreaterThanOrEqual(10);
      expect(mock.stats().routes).toEqual(routesBefore);
    });
  },
);

/** The commands of the first `sh` block under `heading` in README.md. */
const commandsUnder = (markdown: string, heading: string) => commandsOf(blocksUnder(heading, 'sh', markdown)[0]);

devServerTest(
  "the README's commands for callers in any language, run as printed: the schema, a run started from JSON, the same start twice more and once with other input: one tune",
  async () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const [schemaCommand, startCommand, ...more] = commandsUnder(readme, '### Callers in any language');
    expect(more).toEqual([]);
    expect(schemaCommand).toMatch(/^npx tuneflow schema trainThenGenerate > trainThenGenerate\.schema\.json$/);
    expect(startCommand).toMatch(/^temporal workflow start .*--input '/);
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-schema-readme-'));
    try {
      // Liberties: the schema file goes to a scratch folder, not into the repository; `temporal` is the provisioned
      // CLI on this test's server and namespace; the mock service's port is this test's.
      const schemaFile = path.join(scratch, 'trainThenGenerate.schema.json');
      await bash(schemaCommand.replace('> trainThenGenerate.schema.json', `> '${schemaFile}'`));
      const schema = JSON.parse(fs.readFileSync(schemaFile, 'utf8')) as object;
      expect(schema).toEqual(inputSchema('trainThenGenerate'));
      const document = JSON.parse(/--input '([^']*)'/.exec(startCommand)![1]) as unknown;
      const validate = new Ajv2020({ strict: true, strictRequired: false }).compile(schema);
      expect({ valid: validate(document), errors: validate.errors }).toEqual({ valid: true, errors: null });

      await world!.withTuneflow({}, async ({ mock }) => {
        const cli = devServerExecutable();
        const temporal = `temporal() { '${cli}' "$@" --namespace ${TUNEFLOW_NAMESPACE} --address ${world!.server.address}; }`;
        const workflowId = /--workflow-id (\S+)/.exec(startCommand)![1];
        await bash(`${temporal}; ${startCommand.replaceAll('http://127.0.0.1:8080', mock.url)}`);
        const result = (await world!.images.workflow.getHandle(workflowId).result()) as TrainThenGenerateResult;
        expect(result.tune.title?.startsWith(`${workflowId}#`)).toBe(true);
        expect(result.prompts.map((p) => p.images?.length)).toEqual([2]);
        expect(mock.stats().routes['POST /tunes']).toBe(1);

        // The same command twice more (the CLI allows duplicates after the job closed): each run ends with the first
        // run's result and creates nothing; then once with other input: refused, KeyInUse, the service untouched.
        for (let again = 0; again < 2; again++) {
          await bash(`${temporal}; ${startCommand.replaceAll('http://127.0.0.1:8080', mock.url)}`);
          expect(await world!.images.workflow.getHandle(workflowId).result()).toEqual(result);
        }
        const other = startCommand.replace('sks dog on a beach', 'sks dog in the snow');
        expect(other).not.toBe(startCommand);
        await bash(`${temporal}; ${other.replaceAll('http://127.0.0.1:8080', mock.url)}`);
        const refused = await world!.images.workflow
          .getHandle(workflowId)
          .result()
          .then(
            () => undefined,
            (e: unknown) => (e as WorkflowFailedError).cause as ApplicationFailure,
          );
        expect({ type: refused?.type, details: refused?.details?.[0] }).toMatchObject({
          type: 'KeyInUse',
          details: { key: workflowId, fields: ['input.prompts[0].text'] },
        });
        const runs: string[] = [];
        for await (const run of world!.images.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
          runs.push(run.status.name);
        expect(runs.sort()).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED', 'FAILED']);
        expect(mock.stats().routes['POST /tunes']).toBe(1);
        expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(1);
        const api = new TunesApi({ apiKey: API_KEY, baseUrl: mock.url });
        try {
          const titles = (await api.tunes.list()).map((t) => t.title);
          expect(titles.filter((title) => title?.startsWith(`${workflowId}#`))).toHaveLength(1);
        } finally {
          await api.close();
        }
      });
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  },
);

async function bash(command: string): Promise<string> {
  try {
    return (await promisify(execFile)('bash', ['-c', command], { cwd: ROOT })).stdout;
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`bash -c ${command} failed:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}
