import { readCheckpoint, writeCheckpoint } from "../db/checkpoints";
import { ulidFloor } from "../lib/ulid";
import type { SourceConfig } from "../sources/config";
import { envForDatabase } from "../sources/databases";
import {
  databasesOfPeriod,
  periodOf,
  type ReceiptPartitions,
  receiptPartitionsOf,
  sqlWindowMs,
} from "../sources/partitions";
import { type ArchivePosition, archivePage, archivePrefix, quoted, receiptTablesOf } from "./partition-archive";
import { deleteStalePages, differsFromArchive, guardChecks, guardEnd } from "./partition-guard";

/**
 * Retention of the receipt partitions (src/sources/partitions.ts) by drop: while one period is written, the cron
 * readies the databases the next period will write into. Each last held the period a whole ring ago, whose receipts
 * are by then older than the SQL window (`keep`). It is archived to R2 first (partition-archive.ts, a
 * bounded number of pages per run, resumed from a checkpoint), then emptied in one D1 batch: every table dropped and
 * created again from the DDL its own sqlite_master keeps. That writes no row per event: D1 counts only the schema's
 * own rows (each table, index and trigger dropped and created in sqlite_master), the same for 3 receipts as for 3
 * million.
 *
 * A database that still holds unfinished work (a receipt or delivery pending or processing), or a receipt of the
 * period it is being readied for, is not emptied: the step fails with PartitionNotReady, which the cron records and
 * raises as its `cron-failed` alert, every run until it is resolved. Nothing is dropped silently; dead letters are
 * finished work (validation holds dead_letter_retention within `keep`) and go with the partition, in its archive.
 *
 * Its state lives in `DB` (checkpoints, `source = '*'`, reconciler `partition-ring:<binding>`), never in the
 * database it empties.
 */

/** Archive pages (R2 objects) written per database per cron run at most; the next run goes on from the checkpoint. */
export const ARCHIVE_PAGES_PER_RUN = 50;
/** Unfinished receipts named in the refusal, at most. */
const UNFINISHED_NAMED = 5;

export interface PartitionRingCounts {
  archivePages: number;
  archivedRows: number;
  databasesEmptied: number;
  /** D1's `meta.rows_written` of the emptying batches: the schema's rows, a fixed count however many receipts they held. */
  rowsWrittenByDrop: number;
  /** Drops refused because a database held rows its archive did not (written after it): archived again next run. */
  dropsRefused: number;
}

interface RingCheckpoint {
  /** The period this database was emptied for: nothing to do until its turn comes round again. */
  readyFor?: number;
  /** An archive under way, of the period the database holds. */
  archiving?: ArchivePosition & { heldPeriod: number };
}

/** Raised (and recorded as the step's failure) instead of emptying a partition that is not ready to go. */
export class PartitionNotReady extends Error {
  override name = "PartitionNotReady";
}

export const NO_PARTITION_COUNTS: PartitionRingCounts = {
  archivePages: 0,
  archivedRows: 0,
  databasesEmptied: 0,
  rowsWrittenByDrop: 0,
  dropsRefused: 0,
};

/**
 * The period whose databases are readied now (the next one), and the period they last held; null while what they
 * hold may still be within the SQL window, `keep` (config validation keeps a valid ring out of this). The keys go on
 * their own dedupe_retention in the claim shards, which answer duplicates past the drop.
 */
export function periodToReady(
  ring: ReceiptPartitions,
  sources: readonly SourceConfig[],
  now: number,
): { next: number; held: number } | null {
  const next = periodOf(ring, now) + 1;
  const held = next - ring.periods;
  // The newest receipt the held period can have is just before its end.
  return (held + 1) * ring.periodMs <= now - sqlWindowMs(ring, sources) ? { next, held } : null;
}

/** One cron run's turn of the ring: archive, then empty, each database the next period writes into. */
export async function turnPartitionRing(
  env: Env,
  sources: readonly SourceConfig[],
  now: number,
  pageBudget = ARCHIVE_PAGES_PER_RUN,
): Promise<PartitionRingCounts> {
  const parsed = receiptPartitionsOf(env);
  if (!parsed.ok || parsed.partitions === null) return { ...NO_PARTITION_COUNTS };
  const ring = parsed.partitions;
  const due = periodToReady(ring, sources, now);
  if (due === null) return { ...NO_PARTITION_COUNTS };
  const counts = { ...NO_PARTITION_COUNTS };
  for (const binding of databasesOfPeriod(ring, due.next)) {
    const reconciler = `partition-ring:${binding}`;
    const checkpoint = (await readCheckpoint<RingCheckpoint>(env, "*", reconciler)) ?? {};
    if (checkpoint.readyFor === due.next) continue;
    const d1 = envForDatabase(env, binding).DB;
    await refuseUnready(d1, binding, ring, due.next);
    if (!env.BODIES)
      throw new PartitionNotReady(`${binding}: no BODIES bucket is bound to archive it to before it is emptied`);
    let position: ArchivePosition | null =
      checkpoint.archiving?.heldPeriod === due.held
        ? checkpoint.archiving
        : { tables: await receiptTablesOf(d1), tableIndex: 0, after: null, page: 0, rows: 0 };
    const prefix = archivePrefix(binding, due.held * ring.periodMs);
    let archived: ArchivePosition = position;
    for (let pages = 0; position !== null && pages < pageBudget; ) {
      const before: ArchivePosition = position;
      position = await archivePage(d1, env.BODIES, prefix, before);
      if (position === null) break;
      archived = position;
      if (position.page > before.page) {
        pages += 1;
        counts.archivePages += 1;
        counts.archivedRows += position.rows - before.rows;
      }
      await writeCheckpoint(env, "*", reconciler, { archiving: { ...position, heldPeriod: due.held } }, now);
    }
    if (position !== null) continue;
    // A database that held nothing (a quiet period) is ready as it is.
    if (archived.rows > 0) {
      // Checked again just before the drop: work may have been replayed into it while the archive was written.
      await refuseUnready(d1, binding, ring, due.next);
      await deleteStalePages(env.BODIES, prefix, archived.page);
      const written = await emptyDatabase(d1, archived.tableRows ?? {});
      if (written === null) {
        // Rows came in after their table was archived: archive the whole database again next run, then drop.
        counts.dropsRefused += 1;
        await writeCheckpoint(env, "*", reconciler, {} satisfies RingCheckpoint, now);
        continue;
      }
      counts.rowsWrittenByDrop += written;
      counts.databasesEmptied += 1;
    }
    await writeCheckpoint(env, "*", reconciler, { readyFor: due.next } satisfies RingCheckpoint, now);
  }
  return counts;
}

/** Throws PartitionNotReady when `d1` holds unfinished work, or receipts of the period it is being readied for. */
async function refuseUnready(d1: D1Database, binding: string, ring: ReceiptPartitions, next: number): Promise<void> {
  const [unfinished, deliveries, newer] = await d1.batch<{ receiptId: string }>([
    d1.prepare(
      `SELECT id AS receiptId FROM receipts WHERE status IN ('pending', 'processing') LIMIT ${UNFINISHED_NAMED}`,
    ),
    d1.prepare(
      `SELECT receipt_id AS receiptId FROM deliveries WHERE status IN ('pending', 'processing') LIMIT ${UNFINISHED_NAMED}`,
    ),
    d1.prepare("SELECT id AS receiptId FROM receipts WHERE id >= ? LIMIT 1").bind(ulidFloor(next * ring.periodMs)),
  ]);
  const open = [...new Set([...unfinished!.results, ...deliveries!.results].map((row) => row.receiptId))];
  if (open.length > 0) {
    throw new PartitionNotReady(
      `${binding} is next to be emptied but still holds unfinished work (receipts ${open.join(", ")}): finish, dismiss or replay them, or wait for them to go dead`,
    );
  }
  if (newer!.results.length > 0) {
    throw new PartitionNotReady(
      `${binding} already holds receipts of the period it is being emptied for (${newer!.results[0]!.receiptId}): the ring fell behind, nothing was dropped`,
    );
  }
}

/**
 * Empties a database in one D1 batch: drops every table (their indexes and triggers go with them) and creates each
 * again from the DDL sqlite_master held, tables first, then indexes, then triggers, each in the order they were
 * created. The batch opens with a guard (partition-guard.ts) that fails it, dropping nothing, unless every table holds
 * exactly its `archived` row count. Returns D1's rows written by the batch, or null when the guard refused.
 */
export async function emptyDatabase(
  d1: D1Database,
  archived: Readonly<Record<string, number>>,
): Promise<number | null> {
  const { results: schema } = await d1
    .prepare(
      `SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name <> 'd1_migrations'
       AND tbl_name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND tbl_name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY rowid`,
    )
    .all<{ type: "table" | "index" | "trigger" | "view"; name: string; sql: string }>();
  const ofType = (type: string) => schema.filter((entry) => entry.type === type);
  const tables = ofType("table").map((entry) => entry.name);
  const statements = [
    ...ofType("view").map((entry) => d1.prepare(`DROP VIEW ${quoted(entry.name)}`)),
    ...ofType("table")
      .reverse()
      .map((entry) => d1.prepare(`DROP TABLE ${quoted(entry.name)}`)),
    ...["table", "index", "trigger", "view"].flatMap((type) => ofType(type).map((entry) => d1.prepare(entry.sql))),
  ];
  if (statements.length === 0) return 0;
  try {
    const results = await d1.batch([...guardChecks(d1, tables, archived), ...statements, guardEnd(d1)]);
    return results.reduce((sum, result) => sum + (result.meta.rows_written ?? 0), 0);
  } catch (error) {
    if (await differsFromArchive(d1, tables, archived)) return null;
    throw error;
  }
}
