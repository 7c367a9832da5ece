import { parseDuration } from "../lib/duration";
import { stableBucket } from "../lib/stable-hash";
import { ulidTime } from "../lib/ulid";
import { DEFAULT_DATABASE_BINDING, type SourceConfig } from "./config";
import { hasD1Binding } from "./d1-binding";

/**
 * Receipts in time partitions (docs/architecture.md "Receipts in time partitions"): a ring of bound D1 databases,
 * `[vars.RECEIPT_PARTITIONS]`, each holding the receipts of one period at a time. A source opts in with
 * `database = "partitions"`; the database of each new receipt is then a pure function of its id (a ULID carries
 * its time), and retention empties a database whole (DROP TABLE, src/reconcile/partition-drop.ts) instead of
 * deleting its rows one by one.
 *
 * period index = floor(received time / period) mod (databases / spread); slot = stable hash of the id mod spread.
 * The database is `databases[period index × spread + slot]`.
 */

/** What a source's `database` says to opt in. Never a binding name of its own (it is lowercase, bindings need not be). */
export const PARTITIONED_DATABASE = "partitions";

export interface ReceiptPartitions {
  /** The ring's D1 bindings, in ring order: `spread` of them per period. */
  databases: readonly string[];
  periodMs: number;
  /** Databases written at once in one period (the receipts of a period are spread over them by id). */
  spread: number;
  /** `databases.length / spread`: periods the ring holds before a database is written again. */
  periods: number;
  /**
   * `keep`: how long a receipt stays in D1 before its partition is archived and emptied (the SQL window); unset, the
   * longest `dedupe_retention` of the partitioned sources (sqlWindowMs). The claim shards keep keys on their own.
   */
  keepMs?: number | null;
}

export type ParsedPartitions = { ok: true; partitions: ReceiptPartitions | null } | { ok: false; problems: string[] };

/** The deployment's ring, checked against the Worker's bindings; `partitions: null` when none is configured. */
export function receiptPartitionsOf(env: object): ParsedPartitions {
  const raw = (env as { RECEIPT_PARTITIONS?: unknown }).RECEIPT_PARTITIONS;
  if (raw === undefined) return { ok: true, partitions: null };
  const where = "RECEIPT_PARTITIONS";
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
    return { ok: false, problems: [`${where} must be a table with databases, period and spread`] };
  }
  const table = raw as { databases?: unknown; period?: unknown; spread?: unknown; keep?: unknown };
  const problems: string[] = [];
  const databases = Array.isArray(table.databases) ? table.databases : [];
  if (databases.length === 0 || !databases.every((name) => typeof name === "string")) {
    problems.push(`${where}.databases must list the D1 bindings of the ring, such as ["DB_P0", "DB_P1", "DB_P2"]`);
  }
  const names = databases.filter((name): name is string => typeof name === "string");
  for (const name of names) {
    if (name === DEFAULT_DATABASE_BINDING) {
      problems.push(
        `${where}.databases cannot include DB: it holds the system tables, and a partition is emptied whole`,
      );
    } else if (!hasD1Binding(env, name)) {
      problems.push(
        `${where}.databases: ${JSON.stringify(name)} is not a D1 binding of this Worker (add a [[d1_databases]] entry with binding = "${name}")`,
      );
    }
  }
  const repeated = names.filter((name, index) => names.indexOf(name) !== index);
  if (repeated.length > 0)
    problems.push(`${where}.databases names ${[...new Set(repeated)].join(", ")} more than once`);
  const periodMs = parseDuration(table.period);
  if (periodMs === null || periodMs <= 0) {
    problems.push(
      `${where}.period must be a duration longer than zero, like "1d" or "12h" (got ${JSON.stringify(table.period)})`,
    );
  }
  const spread = table.spread ?? 1;
  if (typeof spread !== "number" || !Number.isSafeInteger(spread) || spread < 1) {
    problems.push(
      `${where}.spread must be a whole number of databases per period, 1 or more (got ${JSON.stringify(spread)})`,
    );
  } else if (names.length > 0 && names.length % spread !== 0) {
    problems.push(
      `${where}.spread (${spread}) must divide the number of databases (${names.length}): each period writes ${spread}`,
    );
  }
  const keepMs = table.keep === undefined ? null : parseDuration(table.keep);
  if (table.keep !== undefined && (keepMs === null || keepMs <= 0)) {
    problems.push(
      `${where}.keep must be a duration longer than zero, how long a receipt stays in D1, like "7d" (got ${JSON.stringify(table.keep)})`,
    );
  }
  if (problems.length > 0) return { ok: false, problems };
  const spreadCount = spread as number;
  return {
    ok: true,
    partitions: {
      databases: names,
      periodMs: periodMs!,
      spread: spreadCount,
      periods: names.length / spreadCount,
      keepMs,
    },
  };
}

/** The period a time (epoch ms) falls in: a count of periods since the epoch, so the same everywhere. */
export function periodOf(partitions: ReceiptPartitions, time: number): number {
  return Math.floor(time / partitions.periodMs);
}

/** The databases a period writes into: its place in the ring, `spread` of them. */
export function databasesOfPeriod(partitions: ReceiptPartitions, period: number): readonly string[] {
  const ring = period % partitions.periods;
  return partitions.databases.slice(ring * partitions.spread, (ring + 1) * partitions.spread);
}

/** The database a receipt of a partitioned source lives in, from its id alone. */
export function partitionDatabaseOf(partitions: ReceiptPartitions, receiptId: string): string {
  const slot = partitions.spread === 1 ? 0 : stableBucket(receiptId, partitions.spread);
  return databasesOfPeriod(partitions, periodOf(partitions, ulidTime(receiptId)))[slot]!;
}

export function isPartitioned(source: Pick<SourceConfig, "database">): boolean {
  return source.database === PARTITIONED_DATABASE;
}

/**
 * The database that holds a source's own state (the cron's cursors and checkpoints, its watch numbers): its
 * `database`, or `DB` for a partitioned source, whose receipts are spread over the ring.
 */
export function homeDatabaseOf(source: Pick<SourceConfig, "database">): string {
  return isPartitioned(source) ? DEFAULT_DATABASE_BINDING : source.database;
}

/** Whether `binding` is one of the ring's databases (a valid ring only): those are emptied whole, never row by row. */
export function isPartitionDatabase(env: object, binding: string): boolean {
  const parsed = receiptPartitionsOf(env);
  return parsed.ok && parsed.partitions !== null && parsed.partitions.databases.includes(binding);
}

/**
 * How long a receipt is kept at least in a ring: a database is emptied while the period before the one it is
 * about to serve is written, once its newest receipt is older than the SQL window (sqlWindowMs). Its
 * newest receipt is then (periods − 2) periods old at the earliest, so that is what the ring holds.
 */
export function ringRetentionMs(partitions: ReceiptPartitions): number {
  return (partitions.periods - 2) * partitions.periodMs;
}

/**
 * The SQL window: how long the ring keeps a receipt in D1 before it is archived to R2 and its partition emptied.
 * `keep` when set; else the longest `dedupe_retention` of the partitioned sources, which is what it was before
 * `keep` existed, so a config without it means the same.
 */
export function sqlWindowMs(
  partitions: Pick<ReceiptPartitions, "keepMs">,
  sources: readonly Pick<SourceConfig, "database" | "dedupeRetentionMs">[],
): number {
  if (partitions.keepMs != null) return partitions.keepMs;
  return Math.max(0, ...sources.filter(isPartitioned).map((source) => source.dedupeRetentionMs));
}

/**
 * What the ring refuses, per source (the sources it names answer 503 until fixed, as for any broken table): a
 * partitioned source without a valid ring, or whose retention the ring cannot hold, or with an in-Worker handler;
 * a source of its own database that names one of the ring's.
 */
export function partitionProblems(env: object, sources: readonly SourceConfig[]): Map<string, string[]> {
  const problems = new Map<string, string[]>();
  const add = (source: string, problem: string) => problems.set(source, [...(problems.get(source) ?? []), problem]);
  const parsed = receiptPartitionsOf(env);
  const ring = parsed.ok ? parsed.partitions : null;
  for (const source of sources) {
    const where = `SOURCES.${source.name}`;
    if (!isPartitioned(source)) {
      if (ring?.databases.includes(source.database)) {
        add(
          source.name,
          `${where}: database ${JSON.stringify(source.database)} is one of RECEIPT_PARTITIONS.databases, which retention empties whole; name a database of its own, or database = "${PARTITIONED_DATABASE}"`,
        );
      }
      continue;
    }
    if (!parsed.ok) {
      for (const problem of parsed.problems)
        add(source.name, `${where}: database = "${PARTITIONED_DATABASE}": ${problem}`);
      continue;
    }
    if (ring === null) {
      add(
        source.name,
        `${where}: database = "${PARTITIONED_DATABASE}" needs a [vars.RECEIPT_PARTITIONS] table with databases and period`,
      );
      continue;
    }
    for (const problem of windowProblems(ring, source)) add(source.name, `${where}: ${problem}`);
    for (const { destination, rules } of source.routes) {
      if (destination.kind !== "handler") continue;
      add(
        source.name,
        `${where}: route ${rules.name}: destination handler:${destination.handlerName} cannot run on database = "${PARTITIONED_DATABASE}": a handler's effect rows and the receipt's commit guard must be written in one D1 batch, and a partitioned source's effects would be spread over the ring's databases; forward to an https destination, or keep this source on one database`,
      );
    }
  }
  return problems;
}

/**
 * What the SQL window must hold for one partitioned source: the ring must keep a receipt that long, and a receipt must
 * stay in D1 while anything of it is still to be answered there: its body (payload_retention) and, dead, its replay
 * (dead_letter_retention). Unfinished work is never dropped (partition-drop.ts refuses). Its key need not: the claim
 * shards answer duplicates for the whole dedupe_retention, whatever D1 still holds.
 */
function windowProblems(ring: ReceiptPartitions, source: SourceConfig): string[] {
  const held = `${ring.periods} periods of ${days(ring.periodMs)}, one being written and one emptied ahead of its turn, keep (periods − 2) × period = ${days(ringRetentionMs(ring))}`;
  if (ring.keepMs == null) {
    if (source.dedupeRetentionMs <= ringRetentionMs(ring)) return [];
    return [
      `dedupe_retention (${days(source.dedupeRetentionMs)}) is longer than RECEIPT_PARTITIONS keeps a receipt: ${held}; add databases or lengthen period, or set RECEIPT_PARTITIONS.keep (how long a receipt stays in D1, the claim shards keep its key) to ${days(ringRetentionMs(ring))} or less`,
    ];
  }
  const keep = `RECEIPT_PARTITIONS.keep (${days(ring.keepMs)})`;
  const problems: string[] = [];
  if (ring.keepMs > ringRetentionMs(ring))
    problems.push(
      `${keep} is longer than the ring holds a receipt: ${held}; add databases, lengthen period or shorten keep`,
    );
  if (source.payloadRetentionMs > ring.keepMs)
    problems.push(
      `payload_retention (${days(source.payloadRetentionMs)}) is longer than ${keep}: a receipt's body is answered from its D1 row until payload_retention ends; shorten payload_retention or lengthen keep`,
    );
  if (source.deadLetterRetentionMs > ring.keepMs)
    problems.push(
      `dead_letter_retention (${days(source.deadLetterRetentionMs)}, unset it is dedupe_retention) is longer than ${keep}: a dead letter stays replayable in D1 that long; set dead_letter_retention to ${days(ring.keepMs)} or less, or lengthen keep`,
    );
  return problems;
}

/** A duration for a message: whole days when it is some, else hours. */
function days(ms: number): string {
  return ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : `${Math.round((ms / 3_600_000) * 100) / 100}h`;
}
