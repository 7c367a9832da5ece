import { ulidFloor } from "../lib/ulid";
import type { SourceConfig } from "../sources/config";

/**
 * Retention in D1, for every source at once, in bounded batches:
 *   after payload retention  the body (and kept headers) of a finished receipt is dropped; the row stays as the
 *                            keyed tombstone (source, event key, payload hash), so a late resend still answers
 *                            "duplicate";
 *   after dedupe retention   the tombstone itself goes — receipt (its committed_at is the event's one-effect
 *                            guard) and its attempts together.
 * The claim shards forget their copy of a key on the same cutoff when the cron visits them (redrive.ts).
 * Only terminal receipts are touched: pending and processing ones keep body and key whatever their age. Each
 * statement joins the source list (json_each) against the receipts' id range, so one statement covers
 * all sources with their own cutoffs, and a run's query count does not grow with the number of sources.
 */

const TERMINAL = "('processed', 'stale', 'skipped', 'dead', 'dismissed')";
/** Rows per statement; the rest wait for the next run. */
export const RETENTION_BATCH = 500;

export interface RetentionCounts {
  bodiesDropped: number;
  quarantineBodiesDropped: number;
  keysExpired: number;
  /** reconcile_runs rows older than RUN_HISTORY_MS. */
  runsForgotten: number;
}

/** How long the cron's own run records are kept: one row per run, 288 a day. */
const RUN_HISTORY_MS = 35 * 86_400_000;

/** `[{source, cutoff}]` as JSON, joined in SQL as `json_each(?) AS c` with c.value ->> 'source' / 'cutoff'. */
function cutoffs(sources: readonly SourceConfig[], cutoffOf: (source: SourceConfig) => number): string {
  return JSON.stringify(sources.map((source) => ({ source: source.name, cutoff: cutoffOf(source), idFloor: ulidFloor(cutoffOf(source)) })));
}

/**
 * Receipt ids are ULIDs minted at received_at, so "received before the cutoff" is the id range below the
 * cutoff's floor: the primary key serves it, oldest rows first, and receipts need no time index of their own.
 */
const CUTOFFS = `(SELECT value ->> 'source' AS source, value ->> 'cutoff' AS cutoff, value ->> 'idFloor' AS idFloor FROM json_each(?1))`;

export async function applyRetention(env: Env, sources: readonly SourceConfig[], now: number): Promise<RetentionCounts> {
  const runs = await env.DB.prepare("DELETE FROM reconcile_runs WHERE id IN (SELECT id FROM reconcile_runs WHERE clock < ? LIMIT ?)")
    .bind(now - RUN_HISTORY_MS, RETENTION_BATCH)
    .run();
  const runsForgotten = runs.meta.changes;
  if (sources.length === 0) return { bodiesDropped: 0, quarantineBodiesDropped: 0, keysExpired: 0, runsForgotten };
  const bodyCutoffs = cutoffs(sources, (source) => now - source.payloadRetentionMs);
  const keyCutoffs = cutoffs(sources, (source) => now - source.dedupeRetentionMs);

  const [bodies, quarantineBodies] = await env.DB.batch([
    env.DB.prepare(
      `UPDATE receipts SET body = NULL, kept_headers = NULL
       WHERE id IN (
         SELECT r.id FROM ${CUTOFFS} AS c JOIN receipts AS r ON r.id < c.idFloor AND r.source = c.source
         WHERE r.body IS NOT NULL AND r.status IN ${TERMINAL} LIMIT ?2)`,
    ).bind(bodyCutoffs, RETENTION_BATCH),
    env.DB.prepare(
      `UPDATE quarantine SET body = NULL, kept_headers = NULL
       WHERE id IN (
         SELECT q.id FROM ${CUTOFFS} AS c JOIN quarantine AS q ON q.source = c.source AND q.received_at < c.cutoff
         WHERE q.body IS NOT NULL LIMIT ?2)`,
    ).bind(bodyCutoffs, RETENTION_BATCH),
  ]);

  return {
    bodiesDropped: bodies?.meta.changes ?? 0,
    quarantineBodiesDropped: quarantineBodies?.meta.changes ?? 0,
    keysExpired: await expireKeys(env, keyCutoffs),
    runsForgotten,
  };
}

/**
 * The receipt and its attempts leave in one batch (one transaction), each statement re-checking age and status:
 * the one-effect guard (committed_at) lives in the receipt row itself, so the
 * "one effect" guard lasts exactly as long as the key, and a receipt replayed since the SELECT stays whole.
 */
async function expireKeys(env: Env, keyCutoffs: string): Promise<number> {
  const expiring = await env.DB.prepare(
    `SELECT r.id AS receiptId FROM ${CUTOFFS} AS c JOIN receipts AS r ON r.id < c.idFloor AND r.source = c.source
     WHERE r.status IN ${TERMINAL} LIMIT ?2`,
  )
    .bind(keyCutoffs, RETENTION_BATCH)
    .all<{ receiptId: string }>();
  if (expiring.results.length === 0) return 0;
  // json_each keeps the bound-parameter count fixed however large the batch is.
  const idList = JSON.stringify(expiring.results.map((row) => row.receiptId));
  const deletable = (columns: string) => `SELECT ${columns} FROM ${CUTOFFS} AS c
    JOIN receipts AS r ON r.id < c.idFloor AND r.source = c.source
    WHERE r.id IN (SELECT value FROM json_each(?2)) AND r.status IN ${TERMINAL}`;
  const results = await env.DB.batch([
    env.DB.prepare(`DELETE FROM attempts WHERE receipt_id IN (${deletable("r.id")})`).bind(keyCutoffs, idList),
    env.DB.prepare(`DELETE FROM receipts WHERE id IN (${deletable("r.id")})`).bind(keyCutoffs, idList),
    env.DB.prepare(
      `DELETE FROM quarantine WHERE id IN (
         SELECT q.id FROM ${CUTOFFS} AS c JOIN quarantine AS q ON q.source = c.source AND q.received_at < c.cutoff LIMIT ?2)`,
    ).bind(keyCutoffs, RETENTION_BATCH),
  ]);
  return results[1]?.meta.changes ?? 0;
}
