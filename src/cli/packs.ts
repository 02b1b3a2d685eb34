/** `tuneflow packs`: the packs the account can use, with their classes. Talks to the service directly. */
import { TunesApi } from '../api';
import { DEFAULT_API_URL, loadApiKey, loadApiUrl } from '../config';
import { ExitCode, parseFlags, processIO, runCommand, type CommandIO } from './command-line';

export const PACKS_USAGE = `Usage: tuneflow packs [--json]

Lists the service's packs: id, title, model type and supported classes.

Options:
  --json       machine-readable output on stdout; an error as { "error": {...} } on stderr
  -h, --help   show this help

Environment: TUNEFLOW_API_KEY (required), TUNEFLOW_API_URL (default ${DEFAULT_API_URL}).
`;

export async function packsCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand(
    'packs',
    io,
    async () => {
      const { values } = parseFlags({
        args: argv,
        options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      });
      if (values.help) {
        io.stdout.write(PACKS_USAGE);
        return ExitCode.ok;
      }
      const api = new TunesApi({ apiKey: loadApiKey(io.env), baseUrl: loadApiUrl(io.env) });
      try {
        const packs = await api.packs.list();
        if (values.json) {
          io.stdout.write(`${JSON.stringify(packs)}\n`);
          return ExitCode.ok;
        }
        for (const pack of packs) {
          const classes = Object.keys(pack.cost_mc_hash ?? {}).join(', ') || '-';
          io.stdout.write(
            `${String(pack.id).padEnd(8)} ${(pack.title ?? pack.slug ?? '').padEnd(32)} ${(pack.model_type ?? 'checkpoint').padEnd(10)} ${classes}\n`,
          );
        }
        if (packs.length === 0) io.stdout.write('no packs\n');
        return ExitCode.ok;
      } finally {
        await api.close();
      }
    },
    { json: argv.includes('--json') },
  );
}
