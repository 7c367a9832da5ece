import { sql } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { ulidFloor } from "../../lib/ulid";
import { databasesToRead, ownEntries } from "../receipts/receipt-databases";
import { deadFurtherBySource, oldestWaitingFurtherBySource } from "./further-delivery-numbers";
import { attemptDurations, END_TO_END_MS, PICKUP_MS } from "./latency-sql";
import { type Percentiles, percentilesByGroup } from "./percentiles";
import type { SourceStats } from "./source-stats";

/** The per-source counts one window query returns: the part of SourceStats that is counted from receipts. */
export type WindowCounts = Pick<
  SourceStats,
  | "source"
  | "received"
  | "processed"
  | "stale"
  | "skipped"
  | "dead"
  | "dismissed"
  | "pending"
  | "reconciled"
  | "replayed"
>;

/** What the stats read from the receipt databases, by source. */
export interface ReceiptNumbers {
  counts: Map<string, WindowCounts>;
  /** received_at of the oldest receipt with an unfinished delivery, its own or a further route's (see the queries). */
  oldestPending: Map<string, number>;
  /** Dead deliveries: receipts whose own delivery is dead, and further routes' dead deliveries. */
  deadTotal: Map<string, number>;
  quarantined: Map<string, number>;
  pickup: Map<string, Percentiles>;
  processing: Map<string, Percentiles>;
  attemptDuration: Map<string, Percentiles>;
}

/**
 * Each source's numbers from its own database: every receipt database is read (only the source's own for a
 * one-source report) and each source keeps the rows of the database it lives in (../receipts/receipt-databases.ts). With
 * `DB` alone that is the one set of reads it always was.
 */
export async function receiptNumbers(env: Env, since: number, onlySource?: string): Promise<ReceiptNumbers> {
  const perDatabase = await Promise.all(
    databasesToRead(env, onlySource).map(async ({ binding, env: databaseEnv }) => ({
      binding,
      numbers: await readDatabase(database(databaseEnv), since, onlySource),
    })),
  );
  const merged = <V>(pick: (numbers: ReceiptNumbers) => Map<string, V>, combine: (a: V, b: V) => V) =>
    ownEntries(
      env,
      perDatabase.map(({ binding, numbers }) => ({ binding, entries: pick(numbers) })),
      combine,
    );
  const sum = (a: number, b: number) => a + b;
  return {
    counts: merged((numbers) => numbers.counts, sumCounts),
    oldestPending: merged((numbers) => numbers.oldestPending, Math.min),
    deadTotal: merged((numbers) => numbers.deadTotal, sum),
    quarantined: merged((numbers) => numbers.quarantined, sum),
    pickup: merged((numbers) => numbers.pickup, joinPercentiles),
    processing: merged((numbers) => numbers.processing, joinPercentiles),
    attemptDuration: merged((numbers) => numbers.attemptDuration, joinPercentiles),
  };
}

/** One source's counts from two databases (a partitioned source's ring): each count is the sum of both. */
function sumCounts(a: WindowCounts, b: WindowCounts): WindowCounts {
  const total = { ...a };
  for (const key of COUNTED) total[key] = a[key] + b[key];
  return total;
}

const COUNTED = [
  "received",
  "processed",
  "stale",
  "skipped",
  "dead",
  "dismissed",
  "pending",
  "reconciled",
  "replayed",
] as const satisfies readonly Exclude<keyof WindowCounts, "source">[];

/**
 * Two databases' percentiles of one source, without their samples to rank again: the samples add up, the max is the
 * larger, and p50/p95/p99 are those of the database with more samples (a nearest estimate; a period lives in one
 * database, so a short window is mostly in one).
 */
function joinPercentiles(a: Percentiles, b: Percentiles): Percentiles {
  const larger = b.samples > a.samples ? b : a;
  const maxes = [a.max, b.max].filter((value): value is number => value !== null);
  return {
    ...larger,
    samples: a.samples + b.samples,
    max: maxes.length === 0 ? null : Math.max(...maxes),
  };
}

/**
 * One database's reads. Every one is a primary-key range (receipt and quarantine ids are ULIDs, so "received
 * since" is "id ≥ the smallest id of that instant") or one of the receipts table's partial indexes (dead letters,
 * scheduled retries).
 */
async function readDatabase(db: Database, since: number, onlySource: string | undefined): Promise<ReceiptNumbers> {
  const fromId = ulidFloor(since);
  const inWindow =
    onlySource === undefined ? sql`r.id >= ${fromId}` : sql`r.id >= ${fromId} AND +r.source = ${onlySource}`;
  // `+r.source` keeps SQLite on the id range: the (source, event_key) index would read the source's whole history.
  const bySource = (column: string) => sql.raw(`r.source AS ${column}`);

  const [
    windowCounts,
    pendingRows,
    deadRows,
    quarantineRows,
    pickup,
    processing,
    attemptDuration,
    deadFurther,
    waitingFurther,
  ] = await Promise.all([
    db.all<WindowCounts>(sql`
      SELECT r.source AS source, COUNT(*) AS received,
        COALESCE(SUM(r.status = 'processed'), 0) AS processed, COALESCE(SUM(r.status = 'stale'), 0) AS stale,
        COALESCE(SUM(r.status = 'skipped'), 0) AS skipped, COALESCE(SUM(r.status = 'dead'), 0) AS dead,
        COALESCE(SUM(r.status = 'dismissed'), 0) AS dismissed,
        COALESCE(SUM(r.status IN ('pending', 'processing')), 0) AS pending,
        COALESCE(SUM(r.provenance = 'reconciled'), 0) AS reconciled,
        COALESCE(SUM(r.replay_count > 0 OR r.provenance = 'replayed'), 0) AS replayed
      FROM receipts r WHERE ${inWindow} GROUP BY r.source`),
    // Unfinished work: what arrived in the window, plus anything waiting for a retry (the partial index
    // receipts_retrying). Work older than the window that was never retried is re-driven by the cron, which
    // schedules it, so it shows up here within a cron period.
    db.all<{ source: string; oldest: number }>(sql`
      SELECT source, MIN(received_at) AS oldest FROM (
        SELECT r.source, r.received_at FROM receipts r WHERE ${inWindow} AND r.status IN ('pending', 'processing')
        UNION ALL
        SELECT r.source, r.received_at FROM receipts r WHERE r.next_attempt_at IS NOT NULL AND r.status IN ('pending', 'processing')
      ) GROUP BY source`),
    // Covered by the partial index receipts_dead (source, id) WHERE status = 'dead'.
    db.all<{ source: string; total: number }>(
      sql`SELECT source, COUNT(*) AS total FROM receipts WHERE status = 'dead' GROUP BY source`,
    ),
    db.all<{ source: string; total: number }>(
      // Copies, not rows: past a key's first few, one row counts them all (src/claims/quarantine.ts).
      sql`SELECT source, SUM(copies) AS total FROM quarantine WHERE id >= ${fromId} GROUP BY source`,
    ),
    percentilesByGroup(db, sql`SELECT ${bySource("grp")}, ${PICKUP_MS} AS value FROM receipts r WHERE ${inWindow}`),
    percentilesByGroup(db, sql`SELECT ${bySource("grp")}, ${END_TO_END_MS} AS value FROM receipts r WHERE ${inWindow}`),
    percentilesByGroup(db, attemptDurations(bySource("grp"), inWindow)),
    // A further route's delivery is a delivery like the receipt's own: dead, it is a dead letter; waiting, it is
    // backlog aged from the receipt's arrival (./further-delivery-numbers.ts; rows read: those deliveries, twice).
    deadFurtherBySource(db, onlySource),
    oldestWaitingFurtherBySource(db, onlySource),
  ]);
  const bySourceName = <T extends { source: string | null }, V>(rows: T[], value: (row: T) => V) =>
    new Map(rows.map((row) => [row.source ?? "", value(row)]));
  return {
    counts: bySourceName(windowCounts, (row) => row),
    oldestPending: mergeBySource([...pendingRows, ...waitingFurther], (row) => row.oldest, Math.min),
    deadTotal: mergeBySource(
      [...deadRows, ...deadFurther],
      (row) => row.total,
      (a, b) => a + b,
    ),
    quarantined: bySourceName(quarantineRows, (row) => row.total),
    pickup,
    processing,
    attemptDuration,
  };
}

/** One value per source out of rows from several reads, `combine` joining a source's values. */
function mergeBySource<T extends { source: string | null }>(
  rows: readonly T[],
  value: (row: T) => number,
  combine: (a: number, b: number) => number,
): Map<string, number> {
  const merged = new Map<string, number>();
  for (const row of rows) {
    const source = row.source ?? "";
    const seen = merged.get(source);
    merged.set(source, seen === undefined ? value(row) : combine(seen, value(row)));
  }
  return merged;
}
