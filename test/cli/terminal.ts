/**
 * A terminal model for tests: what a screen `columns` wide shows after the bytes written to it (carriage return,
 * erase line, newline, wrapping past the last column). Enough to see a log line glued to a progress line, or half a
 * line left behind by a redraw.
 */
import { Writable } from 'node:stream';

/** A terminal `columns` wide: what its screen shows, line by line. */
export class Terminal extends Writable {
  readonly isTTY = true;
  lines: string[] = [''];
  private column = 0;
  constructor(readonly columns: number) {
    super({ decodeStrings: false });
  }
  override _write(chunk: string | Buffer, _encoding: BufferEncoding, done: () => void): void {
    const text = chunk.toString();
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (text.startsWith('\x1b[2K', i)) {
        this.lines[this.lines.length - 1] = '';
        i += 3;
      } else if (c === '\r') this.column = 0;
      else if (c === '\n') {
        this.lines.push('');
        this.column = 0;
      } else {
        if (this.column === this.columns) {
          // A full line wraps: what follows starts a new one.
          this.lines.push('');
          this.column = 0;
        }
        const line = this.lines[this.lines.length - 1].padEnd(this.column);
        this.lines[this.lines.length - 1] = line.slice(0, this.column) + c + line.slice(this.column + 1);
        this.column++;
      }
    }
    done();
  }
}

/**
 * The screen after `bytes`, as `columns` wide a terminal shows it.
 * @example screen('a\rb\n', 80) // ['b', '']
 */
export async function screen(bytes: string, columns: number): Promise<string[]> {
  const terminal = new Terminal(columns);
  await new Promise<void>((resolve) => terminal.end(bytes, resolve));
  return terminal.lines;
}
