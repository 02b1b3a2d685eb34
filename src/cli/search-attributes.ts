/**
 * `tuneflow search-attributes`: registers tuneflow's search attributes in the namespace (the operator's one command
 * for a running cluster), so runs can be found by phase, tune, cost and failure type.
 */
import { registerCommands, SEARCH_ATTRIBUTES } from '../contract/search-attributes';
import { missingSearchAttributes, registerSearchAttributes } from '../search-attributes';
import { connectTemporal, ExitCode, parseFlags, processIO, runCommand, type CommandIO } from './command-line';

export const SEARCH_ATTRIBUTES_USAGE = `Usage: tuneflow search-attributes [--check]

Registers tuneflow's search attributes in the Temporal namespace, those it lacks (it can run again):
${SEARCH_ATTRIBUTES.map(({ name, type }) => `  ${name.padEnd(16)} ${type}`).join('\n')}
Runs keep them current, so \`temporal workflow list --query "TuneflowPhase = 'training'"\` and the Web UI find them.
Running workers take them within 10 s. Needs the operator's rights on the namespace; the same as:
  ${registerCommands('<namespace>').join('\n  ')}

Options:
  --check      register nothing: exit 0 when every one is there, 1 when some are missing
  -h, --help   show this help

Environment: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE (default default), TEMPORAL_TLS*,
TEMPORAL_API_KEY, TEMPORAL_PROFILE. Exit 3: Temporal unreachable.
`;

export async function searchAttributesCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('search-attributes', io, async () => {
    const { values } = parseFlags({
      args: argv,
      options: { check: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    });
    if (values.help) {
      io.stdout.write(SEARCH_ATTRIBUTES_USAGE);
      return ExitCode.ok;
    }
    const { client, close } = await connectTemporal(io.env);
    try {
      const { namespace } = client.options;
      const operator = client.connection.operatorService;
      if (values.check) {
        const missing = await missingSearchAttributes(operator, namespace);
        io.stdout.write(
          missing.length
            ? `namespace ${namespace} lacks ${missing.join(', ')}\n`
            : `namespace ${namespace} has every one\n`,
        );
        return missing.length ? ExitCode.failed : ExitCode.ok;
      }
      const added = await registerSearchAttributes(operator, namespace);
      io.stdout.write(
        added.length
          ? `registered ${added.join(', ')} in namespace ${namespace}\n`
          : `namespace ${namespace} has every one already\n`,
      );
      return ExitCode.ok;
    } finally {
      await close();
    }
  });
}
