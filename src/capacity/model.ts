import { type CostReport, monthlyCost } from "./cost";
import { type CapacityInput, checkInput } from "./input";
import { DAY_MS, PUBLISHED_LIMITS } from "./limits";
import type { PerEventFigures } from "./per-event";

export { type CapacityInput, DEFAULT_INPUT } from "./input";

/** How the shard count changes without losing a key: where the model's advice to raise it points. */
export const SHARD_COUNT_CHANGE = `with [vars.CLAIM_SHARD_PREVIOUS], docs/operating.md "Changing the shard count or a source's placement"`;

/**
 * The capacity model: what a sustained event rate needs of each store, held against Cloudflare's published limits,
 * and what it costs at list prices, from the bench's measured per-event figures (./per-event.ts). Pure arithmetic,
 * shared by `npm run cli -- capacity` and `cli check` (./source-capacity.ts). The rules, in docs/performance.md,
 * "Capacity":
 *   - a claim shard keeps each tombstone between one and two key windows (src/claims/partitions.ts), so at the
 *     fullest it holds two windows of them; and it serves about 1,000 requests a second;
 *   - D1 holds each receipt for the SQL window (the key retention unless receipts are partitioned and archived),
 *     with its body for the payload retention when bodies stay in D1;
 *   - R2 holds bodies for the payload retention when they live there, and the archive from the end of the SQL
 *     window to the end of the archive retention.
 */

/** One published limit against what the rate asks of it. */
export interface LimitCheck {
  limit: string;
  used: number;
  max: number;
  unit: "bytes" | "requests/s" | "ms/s" | "shards";
  /** used / max: above 1, the rate does not fit. */
  fill: number;
  /** What to change when it does not fit (or to go further when it binds). */
  change: string;
}

export interface CapacityReport {
  input: CapacityInput;
  measuredBy: PerEventFigures["measuredBy"];
  shards: {
    needed: number;
    neededForStorage: number;
    neededForRequests: number;
    /** What the limits below are held against: the configured count, else the needed one (at most 1,024). */
    counted: number;
    /** Tombstones at the fullest: two key windows of them. */
    tombstoneBytes: number;
    bytesPerShard: number;
    requestsPerSecondPerShard: number;
  };
  d1: {
    bytes: number;
    receiptBytes: number;
    bodyBytes: number;
    daysHeld: number;
    databasesNeeded: number;
    /** One database without partitions (a source writes one), else the configured ring or the needed count. */
    counted: number;
    bytesPerDatabase: number;
    /** Every query the rate makes of D1, and (below) each written database's share: spread over `input.spread`. */
    queriesPerSecond: number | null;
    queriesPerSecondPerDatabase: number | null;
    /**
     * The time those queries take, in ms a second, and each written database's share (queryMsPerEvent). A database
     * runs one query at a time, so its share is held against 1,000 ms a second.
     */
    queryMsPerSecond: number | null;
    queryMsPerSecondPerDatabase: number | null;
  };
  r2: { bodyBytes: number; archiveBytes: number };
  limits: LimitCheck[];
  /** The limit nearest its maximum: what stops this rate, or the next that would. */
  binding: LimitCheck;
  fits: boolean;
  cost: CostReport;
  notes: string[];
}

const SECONDS_PER_DAY = DAY_MS / 1000;

export function capacity(input: CapacityInput, figures: PerEventFigures): CapacityReport {
  checkInput(input);
  const limits = PUBLISHED_LIMITS;
  const rate = input.eventsPerSecond;
  const keyDays = input.keyRetentionMs / DAY_MS;
  const payloadDays = input.payloadRetentionMs / DAY_MS;
  const sqlDays = input.sqlWindowMs === null ? keyDays : input.sqlWindowMs / DAY_MS;
  const archiveDays = input.sqlWindowMs === null ? 0 : (input.archiveRetentionMs ?? input.keyRetentionMs) / DAY_MS;
  const held = (bytesPerEvent: number, days: number) => rate * SECONDS_PER_DAY * days * bytesPerEvent;

  const tombstoneBytes = held(figures.shardBytesPerTombstone, 2 * keyDays);
  const shardRequests = rate * figures.durableObjectRequests;
  const neededForStorage = Math.ceil(tombstoneBytes / limits.durableObjectBytes);
  const neededForRequests = Math.ceil(shardRequests / limits.durableObjectRequestsPerSecond);
  const shardsNeeded = Math.max(1, neededForStorage, neededForRequests);
  const shardsCounted = input.shards ?? Math.min(shardsNeeded, limits.claimShardsPerSource);

  const receiptBytes = held(figures.d1BytesPerReceipt, sqlDays);
  const d1BodyBytes = input.bodies === "d1" ? held(input.bodyBytes, Math.min(payloadDays, sqlDays)) : 0;
  const d1Bytes = receiptBytes + d1BodyBytes;
  const databasesNeeded = Math.max(1, Math.ceil(d1Bytes / limits.d1DatabaseBytes));
  const partitioned = input.sqlWindowMs !== null;
  const databasesCounted = partitioned ? (input.databases ?? databasesNeeded) : 1;
  const queriesPerSecond = figures.d1Calls === null ? null : rate * figures.d1Calls;
  const queriesPerSecondPerDatabase = queriesPerSecond === null ? null : queriesPerSecond / input.spread;
  const queryMs = queryMsPerEvent(figures);
  const queryMsPerSecond = queryMs === null ? null : rate * queryMs;
  const queryMsPerSecondPerDatabase = queryMsPerSecond === null ? null : queryMsPerSecond / input.spread;

  const check = (limit: string, used: number, max: number, unit: LimitCheck["unit"], change: string): LimitCheck => ({
    limit,
    used,
    max,
    unit,
    fill: used / max,
    change,
  });
  const shardCountChange = `the source needs ${shardsNeeded} shards: split its traffic over more sources, or shorten its key retention`;
  const raiseShards = `raise CLAIM_SHARD_COUNT to ${shardsNeeded} (${SHARD_COUNT_CHANGE})`;
  // A count the model chose holds its per-object limit by construction: only a configured one is checked against it.
  const checks: LimitCheck[] = [];
  if (input.shards !== null)
    checks.push(
      check(
        "one claim shard's storage (10 GB; tombstones for up to two key windows)",
        tombstoneBytes / shardsCounted,
        limits.durableObjectBytes,
        "bytes",
        raiseShards,
      ),
      check(
        "one claim shard's request rate (about 1,000 a second)",
        shardRequests / shardsCounted,
        limits.durableObjectRequestsPerSecond,
        "requests/s",
        raiseShards,
      ),
    );
  checks.push(
    check(
      "claim shards of one source (CLAIM_SHARD_COUNT, at most 1,024)",
      shardsNeeded,
      limits.claimShardsPerSource,
      "shards",
      shardCountChange,
    ),
  );
  if (!partitioned || input.databases !== null)
    checks.push(
      check(
        partitioned
          ? "one receipt database (10 GB)"
          : "the source's one database (10 GB; its receipts are not partitioned)",
        d1Bytes / databasesCounted,
        limits.d1DatabaseBytes,
        "bytes",
        partitioned
          ? `spread the receipts over ${databasesNeeded} partition databases, or shorten the SQL window`
          : `partition the source's receipts over ${databasesNeeded} or more databases with an SQL window (--sql-window)`,
      ),
    );
  checks.push(
    check(
      "D1 storage of the account (1 TB on Workers Paid)",
      d1Bytes,
      limits.d1AccountBytes,
      "bytes",
      `${input.bodies === "d1" ? "keep bodies in R2 (a BODIES bucket), " : ""}shorten the SQL window: receipts past it are archived to R2`,
    ),
  );
  if (queryMsPerSecondPerDatabase !== null && queryMsPerSecond !== null) {
    const spreadNeeded = Math.ceil(queryMsPerSecond / limits.d1QueryMsPerSecond);
    checks.push(
      check(
        partitioned
          ? `query time of each database a period's receipts are written to (spread = ${input.spread}; one query at a time: 1,000 ms a second)`
          : "query time of the database receipts are written to (one query at a time: 1,000 ms a second)",
        queryMsPerSecondPerDatabase,
        limits.d1QueryMsPerSecond,
        "ms/s",
        partitioned
          ? `write each period to ${spreadNeeded} databases side by side (RECEIPT_PARTITIONS.spread = ${spreadNeeded}, --spread)`
          : `partition the source's receipts (--sql-window) over ${spreadNeeded} databases a period (--spread), or split its traffic over sources on different databases`,
      ),
    );
  }
  const binding = checks.reduce((worst, next) => (next.fill > worst.fill ? next : worst));

  const r2 = {
    bodyBytes: input.bodies === "r2" ? held(input.bodyBytes, payloadDays) : 0,
    archiveBytes: held(figures.archiveBytesPerReceipt, Math.max(0, archiveDays - sqlDays)),
  };
  const notes = [...figures.fallbacks];
  if (figures.bodiesIn !== null && figures.bodiesIn !== input.bodies)
    notes.push(
      `the figures were measured with bodies in ${figures.bodiesIn === "d1" ? "D1" : "R2"}: their rows and R2 operations are that run's`,
    );
  if (input.shards === null && shardsNeeded > limits.claimShardsPerSource)
    notes.push(`shards are counted at ${limits.claimShardsPerSource}, the most one source may have`);
  return {
    input,
    measuredBy: figures.measuredBy,
    shards: {
      needed: shardsNeeded,
      neededForStorage,
      neededForRequests,
      counted: shardsCounted,
      tombstoneBytes,
      bytesPerShard: tombstoneBytes / shardsCounted,
      requestsPerSecondPerShard: shardRequests / shardsCounted,
    },
    d1: {
      bytes: d1Bytes,
      receiptBytes,
      bodyBytes: d1BodyBytes,
      daysHeld: sqlDays,
      databasesNeeded,
      counted: databasesCounted,
      bytesPerDatabase: d1Bytes / databasesCounted,
      queriesPerSecond,
      queriesPerSecondPerDatabase,
      queryMsPerSecond,
      queryMsPerSecondPerDatabase,
    },
    r2,
    limits: checks,
    binding,
    fits: checks.every((entry) => entry.fill <= 1),
    cost: monthlyCost(input, figures, { shards: shardsCounted, sqlDays, archiveDays }),
    notes,
  };
}

/**
 * One event's share of a database's time: each D1 call at least the ~1 ms Cloudflare's guidance gives a query, or the
 * measured execution time when the calls take longer (a relay batch's insert of a few dozen receipts does); null
 * when the figures carry no D1 calls.
 */
export function queryMsPerEvent(figures: Pick<PerEventFigures, "d1Calls" | "d1ExecutionMs">): number | null {
  if (figures.d1Calls === null) return null;
  return Math.max(figures.d1Calls * PUBLISHED_LIMITS.d1MsPerQuery, figures.d1ExecutionMs ?? 0);
}
