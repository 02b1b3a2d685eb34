/**
 * What a cluster's PostgreSQL holds: each Temporal database's size on disk and its tables' rows, read with the
 * binaries' own psql. Taken before and after the jobs, the difference is what the jobs left: the bytes and rows a job
 * costs the database (closed runs stay for the namespace's retention).
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { findPostgresBin, type Postgres } from './postgres';

export const TEMPORAL_DATABASES = ['temporal', 'temporal_visibility'] as const;

export interface DatabaseFootprint {
  /** pg_database_size: tables, indexes, TOAST and dead rows not yet vacuumed. */
  bytes: number;
  /** Live rows of each table in the public schema, counted exactly. */
  rows: Record<string, number>;
}

export type Footprint = Record<(typeof TEMPORAL_DATABASES)[number], DatabaseFootprint>;

// One statement per database: every table's exact count (query_to_xml runs a count per table).
const SIZE_AND_ROWS = `
SELECT '', pg_database_size(current_database())
UNION ALL
SELECT table_name, (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I.%I', table_schema, table_name), false, true, '')))[1]::text::bigint
FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`;

/**
 * The size and rows of each Temporal database now.
 *
 * @example
 * const before = await footprint(cluster.postgres);
 */
export async function footprint(postgres: Postgres): Promise<Footprint> {
  const psql = path.join(findPostgresBin(), 'psql');
  const read = async (database: string): Promise<DatabaseFootprint> => {
    const connection = ['-h', postgres.host, '-p', String(postgres.port), '-U', postgres.user, '-d', database];
    const { stdout } = await promisify(execFile)(
      psql,
      ['-X', '-A', '-t', '-F', '\t', ...connection, '-c', SIZE_AND_ROWS],
      {
        env: { ...process.env, PGPASSWORD: postgres.password },
      },
    );
    const result: DatabaseFootprint = { bytes: 0, rows: {} };
    for (const line of stdout.trimEnd().split('\n')) {
      const [table, value] = line.split('\t');
      if (table === '') result.bytes = Number(value);
      else if (table) result.rows[table] = Number(value);
    }
    return result;
  };
  return { temporal: await read('temporal'), temporal_visibility: await read('temporal_visibility') };
}

/**
 * What the jobs left, per job: each database's bytes, and the rows of each table that grew, largest first.
 *
 * @example
 * footprintPerJob(before, after, 3000); // [{ database: 'temporal', bytes: 31200, rows: [['history_node', 9.4], ...] }, ...]
 */
export function footprintPerJob(
  before: Footprint,
  after: Footprint,
  jobs: number,
): Array<{ database: string; bytes: number; rows: Array<[string, number]> }> {
  return TEMPORAL_DATABASES.map((database) => {
    const [b, a] = [before[database], after[database]];
    const rows = Object.entries(a.rows)
      .map(([table, n]): [string, number] => [table, Math.round(((n - (b.rows[table] ?? 0)) / jobs) * 100) / 100])
      .filter(([, n]) => n > 0)
      .sort((x, y) => y[1] - x[1]);
    return { database, bytes: Math.round((a.bytes - b.bytes) / jobs), rows };
  });
}
