/**
 * README.md's code blocks, as the tests that run them read them: each under the heading it follows, in order.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export const README = path.resolve(__dirname, '..', 'README.md');

export interface ReadmeBlock {
  /** The nearest heading above it, as written (`### From TypeScript`). */
  heading: string;
  /** 1 for the first block under its heading, and so on. */
  n: number;
  /** The fence's language (`sh`, `ts`, `json`, `text`), or '' for none. */
  language: string;
  text: string;
  /** `heading #n`: what a test names it by. */
  id: string;
}

/** Every fenced block of `markdown`, in order. */
export function readmeBlocks(markdown = fs.readFileSync(README, 'utf8')): ReadmeBlock[] {
  const blocks: ReadmeBlock[] = [];
  let heading = '';
  let n = 0;
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (/^#{1,6} /.test(lines[i])) {
      heading = lines[i];
      n = 0;
      continue;
    }
    const fence = /^```(\S*)$/.exec(lines[i]);
    if (!fence) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`README.md: the block at line ${i + 1} is never closed`);
    n += 1;
    blocks.push({
      heading,
      n,
      language: fence[1],
      text: lines.slice(i + 1, end).join('\n') + '\n',
      id: `${heading} #${n}`,
    });
    i = end;
  }
  return blocks;
}

/** The blocks of `language` under `heading`, in order; at least one. */
export function blocksUnder(heading: string, language: string, markdown?: string): string[] {
  const found = readmeBlocks(markdown).filter((b) => b.heading === heading && b.language === language);
  if (!found.length) throw new Error(`README.md has no ${language} block under ${heading}`);
  return found.map((b) => b.text);
}

/** A shell block's commands: continuation lines joined, comments and blank lines dropped. */
export function commandsOf(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));
}
