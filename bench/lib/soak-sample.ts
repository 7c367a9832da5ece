import { DatabaseSync } from "node:sqlite";
import { type ReceiptStore, shardFiles, usedBytes } from "./store.ts";

/**
 * One soak sample, read from the runtime's own SQLite files (D1 and every claim shard), read-only: sizes as pages
 * in use, counts of what is stored and waiting, and what the cron's runs removed (their reconcile_runs counts).
 */

export const SOAK_SOURCE = "soak";
/** The faulted soak's second source: a share of the arrivals, forwarded to the bench's own backend. */
export const SOAK_FORWARD_SOURCE = "soak-forward";
/** Every source the soak sends to: sizes, counts and the backlog cover them all. */
const SOAK_SOURCES = [SOAK_SOURCE, SOAK_FORWARD_SOURCE];
export const SOAK_ACCOUNT_PREFIX = "soak_acct_";

export interface SoakSample {
  atSeconds: number;
  /** `DB` alone: the handler source's receipts, the system tables and the example domain. */
  d1Bytes: number;
  shardBytes: number;
  /** `DB`'s receipts of the soak sources (the handler source's). */
  receipts: number;
  /** The receipt partition ring's databases (DB_P0…), which hold the forward source's receipts; 0 without faults. */
  ringBytes: number;
  /** The forward source's receipts in the ring. */
  ringReceipts: number;
  receiptsWithBody: number;
  shardKeys: number;
  /** Accepted but not finished: claims still in a shard plus pending or processing receipts. */
  backlog: number;
  oldestPendingSeconds: number;
  /** Rows housekeeping removed since the previous sample (cron runs' counts). */
  receiptsDeleted: number;
  bodiesDropped: number;
  shardKeysDeleted: number;
  cronRuns: number;
}

export interface Totals {
  receiptsDeleted: number;
  bodiesDropped: number;
  shardKeysDeleted: number;
  cronRuns: number;
}

/** Reads every size and count of one sample; `previous` turns the cron's cumulative counts into per-sample ones. */
export function takeSample(
  store: ReceiptStore,
  persistDir: string,
  atSeconds: number,
  previous: Totals,
): { sample: SoakSample; totals: Totals } {
  const now = Date.now();
  const d1 = store.read((database) => {
    const counts = database
      .prepare(
        `SELECT COUNT(*) AS receipts, SUM(body IS NOT NULL) AS withBody
         FROM receipts WHERE source IN (?, ?)`,
      )
      .get(...SOAK_SOURCES) as { receipts: number; withBody: number | null };
    const runs = database.prepare("SELECT counts FROM reconcile_runs WHERE counts IS NOT NULL").all() as {
      counts: string;
    }[];
    const totals: Totals = { receiptsDeleted: 0, bodiesDropped: 0, shardKeysDeleted: 0, cronRuns: runs.length };
    for (const run of runs) {
      const counts = JSON.parse(run.counts) as {
        retention?: { keysExpired?: number; bodiesDropped?: number };
        shards?: { shardKeysExpired?: number };
      };
      totals.receiptsDeleted += counts.retention?.keysExpired ?? 0;
      totals.bodiesDropped += counts.retention?.bodiesDropped ?? 0;
      totals.shardKeysDeleted += counts.shards?.shardKeysExpired ?? 0;
    }
    return { counts, totals, bytes: usedBytes(database) };
  });
  const ring = store.readPartitions((database) => ({
    bytes: usedBytes(database),
    receipts: hasReceipts(database)
      ? (
          database.prepare("SELECT COUNT(*) AS receipts FROM receipts WHERE source IN (?, ?)").get(...SOAK_SOURCES) as {
            receipts: number;
          }
        ).receipts
      : 0,
  }));
  const unfinished = unfinishedReceipts(store, now);
  const shards = shardFiles(persistDir).map((file) => readShard(file));
  const oldest = Math.min(
    unfinished.oldestReceivedAt ?? Infinity,
    ...shards.map((shard) => shard.oldestUnrelayed ?? Infinity),
  );
  const sample: SoakSample = {
    atSeconds,
    d1Bytes: d1.bytes,
    shardBytes: shards.reduce((sum, shard) => sum + shard.bytes, 0),
    receipts: d1.counts.receipts,
    receiptsWithBody: d1.counts.withBody ?? 0,
    ringBytes: ring.reduce((sum, database) => sum + database.bytes, 0),
    ringReceipts: ring.reduce((sum, database) => sum + database.receipts, 0),
    shardKeys: shards.reduce((sum, shard) => sum + shard.keys, 0),
    backlog:
      unfinished.due +
      unfinished.waiting +
      unfinished.processing +
      shards.reduce((sum, shard) => sum + shard.unrelayed, 0),
    oldestPendingSeconds: Number.isFinite(oldest) ? Math.max(0, Math.round((now - oldest) / 1000)) : 0,
    receiptsDeleted: d1.totals.receiptsDeleted - previous.receiptsDeleted,
    bodiesDropped: d1.totals.bodiesDropped - previous.bodiesDropped,
    shardKeysDeleted: d1.totals.shardKeysDeleted - previous.shardKeysDeleted,
    cronRuns: d1.totals.cronRuns - previous.cronRuns,
  };
  return { sample, totals: d1.totals };
}

export const NO_TOTALS: Totals = { receiptsDeleted: 0, bodiesDropped: 0, shardKeysDeleted: 0, cronRuns: 0 };

/**
 * Every claim a shard file holds, whichever time partition keeps it (src/claims/partitions.ts: tables listed in
 * claim_partitions), as a subquery; null for a shard that has none yet.
 */
function everyClaim(database: DatabaseSync): string | null {
  if (!database.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claim_partitions'").get()) {
    return null;
  }
  const tables = (database.prepare("SELECT generation FROM claim_partitions").all() as { generation: number }[]).map(
    ({ generation }) => (generation === 0 ? "event_claims" : `event_claims_${generation}`),
  );
  return `(${tables.map((table) => `SELECT source, relay_pending, received_at FROM ${table}`).join(" UNION ALL ")})`;
}

function readShard(file: string): { bytes: number; keys: number; unrelayed: number; oldestUnrelayed: number | null } {
  const database = new DatabaseSync(file, { readOnly: true });
  try {
    database.exec("PRAGMA busy_timeout = 5000");
    const claims = everyClaim(database);
    if (!claims) return { bytes: usedBytes(database), keys: 0, unrelayed: 0, oldestUnrelayed: null };
    const row = database
      .prepare(
        `SELECT COUNT(*) AS keys, SUM(relay_pending = 1) AS unrelayed,
           MIN(CASE WHEN relay_pending = 1 THEN received_at END) AS oldest
         FROM ${claims} WHERE source IN (?, ?)`,
      )
      .get(...SOAK_SOURCES) as { keys: number; unrelayed: number | null; oldest: number | null };
    return { bytes: usedBytes(database), keys: row.keys, unrelayed: row.unrelayed ?? 0, oldestUnrelayed: row.oldest };
  } finally {
    database.close();
  }
}

/**
 * The soak sources' receipts not finished yet, in EVERY D1 database: `DB` holds the handler source's, the ring's
 * partitions (DB_P0…) the forward source's. Pending and due, pending waiting out a retry delay, leased; and the
 * oldest one's arrival.
 */
function unfinishedReceipts(
  store: ReceiptStore,
  now: number,
): { due: number; waiting: number; processing: number; oldestReceivedAt: number | null } {
  const perDatabase = store.readEach((database) =>
    hasReceipts(database)
      ? (database
          .prepare(
            `SELECT SUM(status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?3)) AS due,
               SUM(status = 'pending' AND next_attempt_at > ?3) AS waiting, SUM(status = 'processing') AS processing,
               MIN(received_at) AS oldest
             FROM receipts WHERE source IN (?1, ?2) AND status IN ('pending', 'processing')`,
          )
          .get(...SOAK_SOURCES, now) as {
          due: number | null;
          waiting: number | null;
          processing: number | null;
          oldest: number | null;
        })
      : null,
  );
  const total = { due: 0, waiting: 0, processing: 0, oldestReceivedAt: null as number | null };
  for (const part of perDatabase) {
    if (!part) continue;
    total.due += part.due ?? 0;
    total.waiting += part.waiting ?? 0;
    total.processing += part.processing ?? 0;
    if (part.oldest !== null) total.oldestReceivedAt = Math.min(total.oldestReceivedAt ?? Infinity, part.oldest);
  }
  return total;
}

/** Whether a D1 file holds receipts (DB and the ring's partitions do; a file being recreated may not, for a moment). */
function hasReceipts(database: DatabaseSync): boolean {
  return database.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipts'").get() !== undefined;
}

/**
 * The backlog alone (claims not yet relayed plus receipts pending or processing), cheap enough to read every
 * second while a fault plays; null when a file cannot be read at that moment (the runtime restarting).
 */
export function backlogNow(store: ReceiptStore, persistDir: string): BacklogParts | null {
  try {
    const parts = unfinishedReceipts(store, Date.now());
    const unrelayed = shardFiles(persistDir).reduce((sum, file) => sum + readShard(file).unrelayed, 0);
    return { unrelayed, due: parts.due, waiting: parts.waiting, processing: parts.processing };
  } catch {
    return null;
  }
}

/**
 * Where the backlog is: claims not yet relayed, receipts pending and due (on the queue, or lost with it), pending
 * but waiting out a retry delay, and leased (processing). Their sum is the backlog.
 */
export interface BacklogParts {
  unrelayed: number;
  due: number;
  waiting: number;
  processing: number;
}

export const backlogTotal = (parts: BacklogParts) => parts.unrelayed + parts.due + parts.waiting + parts.processing;

/**
 * Per soak source, at the end of a run: events not finished yet (claims not relayed, receipts pending or processing)
 * and receipts dead. Neither is applied, and neither is lost: they stand apart in the verdict.
 */
export function unfinishedBySource(
  store: ReceiptStore,
  persistDir: string,
): Map<string, { unfinished: number; dead: number }> {
  const counts = new Map(SOAK_SOURCES.map((source) => [source, { unfinished: 0, dead: 0 }]));
  // Every D1 database: the forward source's receipts live in the ring's partitions, not in DB.
  const rows = store.readEach((database) =>
    hasReceipts(database)
      ? (database
          .prepare(
            `SELECT source, SUM(status IN ('pending', 'processing')) AS unfinished, SUM(status = 'dead') AS dead
             FROM receipts WHERE source IN (?, ?) GROUP BY source`,
          )
          .all(...SOAK_SOURCES) as Array<{ source: string; unfinished: number; dead: number }>)
      : [],
  );
  for (const row of rows.flat()) {
    const count = counts.get(row.source)!;
    count.unfinished += row.unfinished;
    count.dead += row.dead;
  }
  for (const file of shardFiles(persistDir)) {
    const database = new DatabaseSync(file, { readOnly: true });
    try {
      database.exec("PRAGMA busy_timeout = 5000");
      const everyClaimHeld = everyClaim(database);
      if (!everyClaimHeld) continue;
      const claims = database
        .prepare(
          `SELECT source, COUNT(*) AS n FROM ${everyClaimHeld} WHERE source IN (?, ?) AND relay_pending = 1 GROUP BY source`,
        )
        .all(...SOAK_SOURCES) as Array<{ source: string; n: number }>;
      for (const claim of claims) counts.get(claim.source)!.unfinished += claim.n;
    } finally {
      database.close();
    }
  }
  return counts;
}

/** Events whose credit was applied: the accounts table outlives every retention window. */
export function creditedEvents(store: ReceiptStore): number {
  return store.read((database) => {
    const row = database
      .prepare("SELECT COALESCE(SUM(credits), 0) AS credited FROM accounts WHERE id LIKE ?")
      .get(`${SOAK_ACCOUNT_PREFIX}%`) as { credited: number };
    return row.credited;
  });
}

export function formatSamples(samples: readonly SoakSample[]): string {
  const header =
    "| t (s) | D1 MB | shards MB | receipts | with body | ring MB | ring receipts | shard keys | backlog | oldest pending (s) | deleted receipts | dropped bodies | deleted shard keys | cron runs |";
  const rule = "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
  const mb = (bytes: number) => (bytes / 1_048_576).toFixed(2);
  const rows = samples.map(
    (sample) =>
      `| ${sample.atSeconds} | ${mb(sample.d1Bytes)} | ${mb(sample.shardBytes)} | ${sample.receipts} | ${sample.receiptsWithBody} | ` +
      `${mb(sample.ringBytes)} | ${sample.ringReceipts} | ${sample.shardKeys} | ` +
      `${sample.backlog} | ${sample.oldestPendingSeconds} | ${sample.receiptsDeleted} | ${sample.bodiesDropped} | ${sample.shardKeysDeleted} | ${sample.cronRuns} |`,
  );
  return [header, rule, ...rows].join("\n");
}
