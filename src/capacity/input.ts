import { DAY_MS, PUBLISHED_LIMITS } from "./limits";
import { CapacityInputError } from "./per-event";

/** What the capacity model (./model.ts) is asked about: one source's sustained rate and its settings. */
export interface CapacityInput {
  /** Sustained events a second of one source. */
  eventsPerSecond: number;
  bodyBytes: number;
  keyRetentionMs: number;
  payloadRetentionMs: number;
  /** How long receipts stay in D1 before the archive takes them; null: the whole key retention, no archive. */
  sqlWindowMs: number | null;
  /** How long the archive keeps a receipt, since it arrived; null: as long as its key. */
  archiveRetentionMs: number | null;
  /** Where bodies live for their payload retention: R2 segments (a BODIES bucket), or the D1 receipt row. */
  bodies: "r2" | "d1";
  /** CLAIM_SHARD_COUNT to hold the rate against; null: as many as the rate needs. */
  shards: number | null;
  /** The receipt databases the source's receipts are spread over (partitions); null: as many as needed. */
  databases: number | null;
  /**
   * How many databases one period's receipts are written to side by side (RECEIPT_PARTITIONS.spread): each takes
   * that share of the queries. 1 without partitions: a source writes one database.
   */
  spread: number;
}

export const DEFAULT_INPUT = {
  keyRetentionMs: 35 * DAY_MS,
  payloadRetentionMs: 7 * DAY_MS,
  sqlWindowMs: null,
  archiveRetentionMs: null,
  bodies: "r2",
  shards: null,
  databases: null,
  spread: 1,
} as const satisfies Partial<CapacityInput>;

/** Every problem of the input at once, as a CapacityInputError. */
export function checkInput(input: CapacityInput): void {
  const problems: string[] = [];
  const positive = (value: number, what: string) => {
    if (!(Number.isFinite(value) && value > 0)) problems.push(`${what} must be a number above 0 (got ${value})`);
  };
  positive(input.eventsPerSecond, "the rate (events a second)");
  if (!(Number.isFinite(input.bodyBytes) && input.bodyBytes >= 0))
    problems.push(`the body size must be a number of bytes, 0 or more (got ${input.bodyBytes})`);
  positive(input.keyRetentionMs, "the key retention");
  positive(input.payloadRetentionMs, "the payload retention");
  if (input.payloadRetentionMs > input.keyRetentionMs)
    problems.push("the payload retention cannot outlast the key retention (as payload_retention cannot)");
  if (input.sqlWindowMs !== null) {
    positive(input.sqlWindowMs, "the SQL window");
    if (input.sqlWindowMs > input.keyRetentionMs)
      problems.push("the SQL window cannot outlast the key retention (receipts are gone by then)");
  }
  if (input.archiveRetentionMs !== null) {
    if (input.sqlWindowMs === null)
      problems.push("an archive retention needs an SQL window: without one nothing is archived");
    else if (input.archiveRetentionMs < input.sqlWindowMs)
      problems.push("the archive retention cannot be shorter than the SQL window");
  }
  const count = (value: number | null, what: string, max: number) => {
    if (value !== null && !(Number.isInteger(value) && value >= 1 && value <= max))
      problems.push(`${what} must be a whole number from 1 to ${max} (got ${value})`);
  };
  count(input.shards, "the shard count", PUBLISHED_LIMITS.claimShardsPerSource);
  count(input.databases, "the database count", Number.MAX_SAFE_INTEGER);
  if (input.databases !== null && input.sqlWindowMs === null)
    problems.push("a database count needs an SQL window: without partitions a source's receipts go to one database");
  count(input.spread, "the spread", Number.MAX_SAFE_INTEGER);
  if (input.spread > 1 && input.sqlWindowMs === null)
    problems.push("a spread needs an SQL window: without partitions a source's receipts go to one database");
  if (input.databases !== null && input.databases % input.spread !== 0)
    problems.push(
      `the spread (${input.spread}) must divide the databases (${input.databases}), as in RECEIPT_PARTITIONS`,
    );
  if (problems.length > 0) throw new CapacityInputError(problems.join("; "));
}
