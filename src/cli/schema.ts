/**
 * `tuneflow schema`: the JSON Schema of a workflow's input (or of its Nexus operation's), for callers in any language
 * that start tuneflow by name with JSON. Generated from the input contract (src/contract/input-schema.ts); `--out` writes every
 * one, as the build does into lib/schemas/.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inputSchema } from '../contract/input-schema';
import { WORKFLOW_NAMES, type WorkflowName } from '../contract/jobs';
import { ExitCode, parseFlags, processIO, runCommand, UsageError, type CommandIO } from './command-line';

export const SCHEMA_USAGE = `Usage: tuneflow schema <workflow> [--nexus]
       tuneflow schema --out <dir>

Prints the JSON Schema (draft 2020-12) of a workflow's input: what \`temporal workflow start --type <workflow>
--input '...'\` (or any SDK) may send. A document it accepts passes the workflow's own checks, with two exceptions
said in its descriptions (the options' polls bound, characteristics sent as a JSON string); one it refuses, the
workflow refuses too, naming the same field.

Workflows: ${WORKFLOW_NAMES.join(', ')}

Options:
  --nexus      the input of the Nexus operation instead: the workflow's and the business key (\`key\`)
  --out <dir>  write every schema into <dir>: <workflow>.json and nexus/<workflow>.json
  -h, --help   show this help
`;

/** The file of each schema under a folder: `<workflow>.json`, `nexus/<workflow>.json`. */
export function schemaFiles(dir: string): Array<{ file: string; workflow: WorkflowName; nexus: boolean }> {
  return WORKFLOW_NAMES.flatMap((workflow) => [
    { file: path.join(dir, `${workflow}.json`), workflow, nexus: false },
    { file: path.join(dir, 'nexus', `${workflow}.json`), workflow, nexus: true },
  ]);
}

/** Writes every schema under `dir` (schemaFiles), as the build does into lib/schemas/ (scripts/write-schemas.js). */
export function writeSchemas(dir: string): void {
  for (const { file, workflow, nexus } of schemaFiles(dir)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `${JSON.stringify(inputSchema(workflow, { nexus }), null, 2)}\n`);
  }
}

export async function schemaCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('schema', io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      allowPositionals: true,
      options: { nexus: { type: 'boolean' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
    if (values.help) {
      io.stdout.write(SCHEMA_USAGE);
      return ExitCode.ok;
    }
    if (values.out !== undefined) {
      if (positionals.length) throw new UsageError('--out writes every schema: name no workflow');
      writeSchemas(values.out);
      return ExitCode.ok;
    }
    const [workflow, ...extra] = positionals;
    if (!workflow) throw new UsageError(`name a workflow: ${WORKFLOW_NAMES.join(', ')}`);
    if (extra.length) throw new UsageError(`one workflow at a time (got ${positionals.join(' ')})`);
    if (!(WORKFLOW_NAMES as readonly string[]).includes(workflow))
      throw new UsageError(`unknown workflow '${workflow}' (known: ${WORKFLOW_NAMES.join(', ')})`);
    const schema = inputSchema(workflow as WorkflowName, { nexus: values.nexus === true });
    io.stdout.write(`${JSON.stringify(schema, null, 2)}\n`);
    return ExitCode.ok;
  });
}
