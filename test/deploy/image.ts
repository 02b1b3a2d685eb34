/**
 * The Dockerfile replayed without a container engine (there is none here): each stage in a scratch folder that stands
 * for its root filesystem; each COPY brings only what Docker would (the build context less .dockerignore, or the named
 * stage's files), in order; each RUN runs as written (`/bin/sh -c` in its WORKDIR, with the stage's ENV); then the
 * image's ENTRYPOINT runs from the last stage, as its USER. What this cannot stand in for: the base image's own files
 * (its Node major version must be this machine's, checked) and isolation from this machine's tools on PATH.
 *
 * A replay that succeeded is kept under the hash of everything it read (`$TMPDIR/tuneflow-image/<hash>`), as Docker
 * keeps its layers, so the workflow test that runs the image's worker reuses the unit test's replay.
 */
import dockerignore from '@balena/dockerignore';
import { spawn, type SpawnOptions } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');

export interface Instruction {
  keyword: string;
  /** Everything after the keyword, continuation lines joined. */
  args: string;
  /** Where it starts in the Dockerfile (1-based). */
  line: number;
}

export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/** The Dockerfile's stages: comments dropped, continuation lines joined, keywords upper-cased. */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let logical = lines[i].trim();
    if (logical === '' || logical.startsWith('#')) continue;
    while (logical.endsWith('\\') && i + 1 < lines.length) {
      let next = lines[++i].trim();
      // Comment lines inside a continued instruction are dropped, as Docker does.
      while (next.startsWith('#') && i + 1 < lines.length) next = lines[++i].trim();
      logical = `${logical.slice(0, -1).trimEnd()} ${next}`;
    }
    const match = /^(\S+)\s*(.*)$/s.exec(logical)!;
    const instruction = { keyword: match[1].toUpperCase(), args: match[2].trim(), line: start + 1 };
    if (instruction.keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      if (!from) throw new Error(`Dockerfile line ${instruction.line}: FROM ${instruction.args} is not understood`);
      stages.push({ from: from[1], name: from[2], instructions: [] });
    } else if (!stages.length) {
      throw new Error(`Dockerfile line ${instruction.line}: ${instruction.keyword} before any FROM`);
    } else {
      stages[stages.length - 1].instructions.push(instruction);
    }
  }
  return stages;
}

/** The exec form (`["node", "x"]`) of RUN, CMD and ENTRYPOINT, or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  try {
    const parsed: unknown = JSON.parse(args);
    return Array.isArray(parsed) && parsed.every((a) => typeof a === 'string') ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** `ENV A=1 B="two words"`, or the legacy `ENV A one value`. */
function parseEnv(args: string): Record<string, string> {
  if (!/^[^\s=]+=/.test(args)) {
    const [name, ...value] = args.split(/\s+/);
    return { [name]: value.join(' ') };
  }
  const env: Record<string, string> = {};
  for (const pair of args.matchAll(/([^\s=]+)=("(?:[^"\\]|\\.)*"|'[^']*'|\S*)/g))
    env[pair[1]] = /^["']/.test(pair[2]) ? pair[2].slice(1, -1).replace(/\\(.)/g, '$1') : pair[2];
  return env;
}

/** COPY's flags and its sources and destination. */
function parseCopy(instruction: Instruction): { from?: string; sources: string[]; destination: string } {
  const words = execForm(instruction.args) ?? instruction.args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift()!;
    if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
    // --chown, --chmod, --link change what the files are: not replayed, so not accepted silently.
    else throw new Error(`Dockerfile line ${instruction.line}: COPY ${flag} is not replayed (teach ${__filename})`);
  }
  if (words.length < 2) throw new Error(`Dockerfile line ${instruction.line}: COPY needs a source and a destination`);
  if (words.some((w) => /[*?[]/.test(w)))
    throw new Error(`Dockerfile line ${instruction.line}: COPY with wildcards is not replayed (teach ${__filename})`);
  return { from, sources: words.slice(0, -1), destination: words[words.length - 1] };
}

/** What the image runs: the last stage's settings, its root folder standing for `/`. */
export interface Image {
  /** The folder that stands for the image's `/`. */
  root: string;
  /** WORKDIR, in the image. */
  workdir: string;
  env: Record<string, string>;
  user?: string;
  entrypoint: string[];
  cmd: string[];
  exposed: number[];
}

/** A stage as it is replayed: the image it stands for so far. */
type StageState = Image;

/** Where the image's absolute `inImage` path is, on this machine. */
export function hostPath(root: string, inImage: string): string {
  return path.join(root, path.posix.resolve('/', inImage));
}

/** The build context's files under `source` (a file or a folder) that .dockerignore leaves in, relative paths. */
function contextFiles(context: string, source: string, ignored: (rel: string) => boolean, exceptions: boolean) {
  const rel = path.posix.normalize(source).replace(/^(\.\/)+|\/$/g, '');
  const files: string[] = [];
  const walk = (relative: string) => {
    const full = path.join(context, relative);
    if (!fs.existsSync(full)) return;
    if (fs.statSync(full).isDirectory()) {
      // An ignored folder is skipped whole, unless a `!` pattern might bring part of it back.
      if (relative !== '' && relative !== '.' && ignored(relative) && !exceptions) return;
      for (const entry of fs.readdirSync(full).sort())
        walk(relative === '.' || relative === '' ? entry : `${relative}/${entry}`);
    } else if (!ignored(relative)) {
      files.push(relative);
    }
  };
  walk(rel === '' ? '.' : rel);
  return { base: rel === '' ? '.' : rel, files };
}

function buildContext(context: string) {
  const ignoreFile = path.join(context, '.dockerignore');
  const patterns = fs.existsSync(ignoreFile) ? fs.readFileSync(ignoreFile, 'utf8') : '';
  const filter = dockerignore().add(patterns.split('\n'));
  return {
    patterns,
    ignored: (rel: string) => filter.ignores(rel),
    exceptions: patterns.split('\n').some((line) => line.trim().startsWith('!')),
  };
}

/** Copies a file, keeping its mode; makes the folders on the way. */
function copyFile(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
  fs.chmodSync(to, fs.statSync(from).mode & 0o7777);
}

/** COPY as Docker does it: a folder's contents into the destination, files into it (a folder when it ends in `/`). */
function replayCopy(
  instruction: Instruction,
  stage: StageState,
  context: string,
  stages: Map<string, StageState>,
): void {
  const { from, sources, destination } = parseCopy(instruction);
  const target = hostPath(stage.root, path.posix.resolve(stage.workdir, destination));
  const intoFolder = destination.endsWith('/') || sources.length > 1;
  const ctx = buildContext(context);
  for (const source of sources) {
    if (from !== undefined) {
      const origin = stages.get(from);
      if (!origin)
        throw new Error(`Dockerfile line ${instruction.line}: COPY --from=${from}: no earlier stage of that name`);
      const full = hostPath(origin.root, path.posix.resolve(origin.workdir, source));
      if (!fs.existsSync(full))
        throw new Error(`Dockerfile line ${instruction.line}: COPY --from=${from} ${source}: not in that stage`);
      if (fs.statSync(full).isDirectory()) fs.cpSync(full, target, { recursive: true, verbatimSymlinks: true });
      else copyFile(full, intoFolder ? path.join(target, path.basename(full)) : target);
      continue;
    }
    const { base, files } = contextFiles(context, source, ctx.ignored, ctx.exceptions);
    if (!files.length)
      throw new Error(`Dockerfile line ${instruction.line}: COPY ${source}: not in the build context (or ignored)`);
    const isFolder = fs.statSync(path.join(context, base)).isDirectory();
    for (const file of files) {
      const relative = isFolder ? path.posix.relative(base, file) : path.basename(file);
      copyFile(path.join(context, file), intoFolder || isFolder ? path.join(target, relative) : target);
    }
  }
}

/** Runs a RUN as written; fails with its last output lines. */
function replayRun(instruction: Instruction, stage: StageState, label: string): Promise<void> {
  const exec = execForm(instruction.args);
  const [file, args] = exec ? [exec[0], exec.slice(1)] : ['/bin/sh', ['-c', instruction.args]];
  const home = hostPath(stage.root, '/root');
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    // npm's cache of this stage's own (a copy of this machine's, so nothing is downloaded twice): what a RUN does to
    // it (`npm cache clean`) stays in the stage, as it would in a container.
    npm_config_cache: path.join(home, '.npm'),
    ...stage.env,
  };
  const child = spawn(file, args, { cwd: hostPath(stage.root, stage.workdir), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-6000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) =>
      code === 0
        ? resolve()
        : reject(
            new Error(
              `${label}: RUN ${instruction.args} (Dockerfile line ${instruction.line}) exited ${code ?? signal}:\n${tail}`,
            ),
          ),
    );
  });
}

/** A hard link, or a copy where the cache is on another file system than the scratch folders. */
function linkOrCopy(from: string, to: string): void {
  try {
    fs.linkSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    fs.copyFileSync(from, to);
  }
}

/** A hard-linked copy of this machine's npm cache (cacache never rewrites a file in place, so links are safe). */
function seedNpmCache(home: string): void {
  const cache = path.join(process.env.HOME || os.homedir(), '.npm', '_cacache');
  if (!fs.existsSync(cache)) return;
  const target = path.join(home, '.npm', '_cacache');
  const link = (from: string, to: string) => {
    fs.mkdirSync(to, { recursive: true });
    for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
      const [a, b] = [path.join(from, entry.name), path.join(to, entry.name)];
      if (entry.isDirectory()) link(a, b);
      else if (entry.isFile()) linkOrCopy(a, b);
    }
  };
  link(cache, target);
}

/** The Node major version of a `node:<version>...` image, which must be this machine's. */
function checkBaseImage(from: string, line: string): void {
  const match = /^node:(\d+)/.exec(from);
  if (!match) throw new Error(`${line}: FROM ${from}: the replay knows only the node images (teach ${__filename})`);
  const here = process.versions.node.split('.')[0];
  if (match[1] !== here)
    throw new Error(`${line}: FROM ${from} is Node ${match[1]}, this machine runs Node ${here}: the replay would lie`);
}

/** Replays every stage into `folder`; returns the last stage as the image. */
async function replayStages(stages: Stage[], context: string, folder: string): Promise<Image> {
  const done = new Map<string, StageState>();
  let state: StageState | undefined;
  for (const [index, stage] of stages.entries()) {
    const label = `stage ${stage.name ?? index}`;
    const earlier = done.get(stage.from);
    const root = path.join(folder, `stage-${index}`);
    if (earlier) {
      fs.cpSync(earlier.root, root, { recursive: true, verbatimSymlinks: true });
      state = { ...earlier, root, env: { ...earlier.env }, exposed: [...earlier.exposed] };
    } else {
      checkBaseImage(stage.from, label);
      fs.mkdirSync(root, { recursive: true, mode: 0o755 });
      seedNpmCache(hostPath(root, '/root'));
      state = { root, workdir: '/', env: {}, entrypoint: [], cmd: [], exposed: [] };
    }
    for (const instruction of stage.instructions) {
      const { keyword, args } = instruction;
      switch (keyword) {
        case 'WORKDIR':
          state.workdir = path.posix.resolve(state.workdir, args);
          fs.mkdirSync(hostPath(root, state.workdir), { recursive: true });
          break;
        case 'ENV':
          Object.assign(state.env, parseEnv(args));
          break;
        case 'COPY':
          replayCopy(instruction, state, context, done);
          break;
        case 'RUN':
          await replayRun(instruction, state, label);
          break;
        case 'USER':
          state.user = args;
          break;
        case 'EXPOSE':
          state.exposed.push(...args.split(/\s+/).map((port) => Number(port.split('/')[0])));
          break;
        case 'ENTRYPOINT':
        case 'CMD': {
          const command = execForm(args) ?? ['/bin/sh', '-c', args];
          if (keyword === 'ENTRYPOINT') state.entrypoint = command;
          else state.cmd = command;
          break;
        }
        case 'LABEL':
          break;
        default:
          throw new Error(`Dockerfile line ${instruction.line}: ${keyword} is not replayed (teach ${__filename})`);
      }
    }
    done.set(String(index), state);
    if (stage.name) done.set(stage.name, state);
  }
  // Only the last stage is the image; the others (and their npm caches) go.
  for (const index of stages.keys())
    if (index < stages.length - 1) fs.rmSync(path.join(folder, `stage-${index}`), { recursive: true, force: true });
  fs.rmSync(hostPath(state!.root, '/root/.npm'), { recursive: true, force: true });
  return { ...state!, root: path.relative(folder, state!.root) };
}

/** The hash of everything a replay reads: the Dockerfile, .dockerignore, every file a COPY brings, Node and npm. */
function inputsHash(dockerfile: string, stages: Stage[], context: string): string {
  const hash = createHash('sha256').update(dockerfile).update(`node ${process.version}`);
  const ctx = buildContext(context);
  hash.update(ctx.patterns);
  for (const stage of stages)
    for (const instruction of stage.instructions) {
      if (instruction.keyword !== 'COPY') continue;
      const { from, sources } = parseCopy(instruction);
      if (from !== undefined) continue;
      for (const source of sources)
        for (const file of contextFiles(context, source, ctx.ignored, ctx.exceptions).files)
          hash.update(`${file}\0`).update(fs.readFileSync(path.join(context, file)));
    }
  return hash.digest('hex').slice(0, 16);
}

export interface ReplayOptions {
  /** @default the repository */
  context?: string;
  /** @default `Dockerfile` in the context */
  dockerfile?: string;
}

/**
 * The image the Dockerfile builds, replayed here (or found from an earlier replay of the same inputs).
 *
 * @example
 * const image = await replayImage();
 * spawn(...imageCommand(image, ['worker', '--help']));
 */
export async function replayImage(options: ReplayOptions = {}): Promise<Image> {
  const context = options.context ?? ROOT;
  const text = fs.readFileSync(options.dockerfile ?? path.join(context, 'Dockerfile'), 'utf8');
  const stages = parseDockerfile(text);
  const cache = path.join(os.tmpdir(), 'tuneflow-image');
  const destination = path.join(cache, inputsHash(text, stages, context));
  const read = (folder: string): Image => {
    const image = JSON.parse(fs.readFileSync(path.join(folder, 'image.json'), 'utf8')) as Image;
    return { ...image, root: path.join(folder, image.root) };
  };
  if (fs.existsSync(path.join(destination, 'image.json'))) {
    // Marked as used, so another replay's clean-up leaves it.
    fs.utimesSync(destination, new Date(), new Date());
    return read(destination);
  }

  fs.mkdirSync(cache, { recursive: true, mode: 0o755 });
  const folder = `${destination}.building-${randomBytes(4).toString('hex')}`;
  fs.mkdirSync(folder, { mode: 0o755 });
  try {
    const image = await replayStages(stages, context, folder);
    fs.writeFileSync(path.join(folder, 'image.json'), JSON.stringify(image, null, 2));
    fs.renameSync(folder, destination);
  } catch (err) {
    fs.rmSync(folder, { recursive: true, force: true });
    // Another replay of the same inputs finished first: use it.
    if (!fs.existsSync(path.join(destination, 'image.json'))) throw err;
  }
  // Replays of other inputs unused for half an hour go: each holds a production node_modules (~280 MB), and every
  // change to src/ makes a new one.
  // Another replay (another checkout's test run) may remove or rename an entry between the listing and its stat.
  for (const entry of fs.readdirSync(cache)) {
    const full = path.join(cache, entry);
    const modifiedAt = fs.statSync(full, { throwIfNoEntry: false })?.mtimeMs;
    if (full !== destination && modifiedAt !== undefined && Date.now() - modifiedAt > 30 * 60_000)
      fs.rmSync(full, { recursive: true, force: true });
  }
  return read(destination);
}

/** The uid and gid of `name` in this machine's /etc/passwd, if it has that user. */
function userIds(name: string): { uid: number; gid: number } | undefined {
  for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name || uid === name) return { uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

/**
 * How to start the image's entrypoint with `args` in place of its CMD, as its USER: that user where this machine has
 * it, else `nobody` (what matters is not root), when this process is root; as this process's user otherwise.
 *
 * @example
 * const child = spawn(...imageCommand(image, ['worker', '--help'], { TUNEFLOW_API_KEY: 'k' }));
 */
export function imageCommand(
  image: Image,
  args: string[] = image.cmd,
  env: Record<string, string> = {},
): [string, string[], SpawnOptions] {
  const [file, ...entryArgs] = image.entrypoint.length ? image.entrypoint : args;
  const home = hostPath(image.root, image.user ? `/home/${image.user}` : '/root');
  fs.mkdirSync(home, { recursive: true });
  const options: SpawnOptions = {
    cwd: hostPath(image.root, image.workdir),
    env: { PATH: process.env.PATH, HOME: home, ...image.env, ...env },
  };
  if (image.user && process.getuid?.() === 0) {
    const ids = userIds(image.user) ?? userIds('nobody');
    if (!ids) throw new Error(`USER ${image.user}: neither that user nor nobody exists here`);
    fs.chownSync(home, ids.uid, ids.gid);
    Object.assign(options, ids);
  }
  return [file, [...entryArgs, ...(image.entrypoint.length ? args : [])], options];
}
