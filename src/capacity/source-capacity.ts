import type { SourceConfig } from "../sources/config";
import { expectedRate } from "../sources/expected-rate";
import { isPartitioned, type ReceiptPartitions, sqlWindowMs } from "../sources/partitions";
import { DAY_MS, PUBLISHED_LIMITS } from "./limits";
import { type CapacityReport, capacity, queryMsPerEvent, SHARD_COUNT_CHANGE } from "./model";
import type { PerEventFigures } from "./per-event";
import { byteSize } from "./size";

/**
 * `cli check`'s capacity warnings: each source that sets `expected_rate`, held by the capacity model (./model.ts)
 * against what it is configured with: CLAIM_SHARD_COUNT shards of its own, and the database its receipts go to,
 * which it shares with every source naming the same binding. Receipts only: the body size is not configured, so
 * bodies kept in D1 come on top of these figures (docs/performance.md, "Capacity").
 */

export interface DeploymentShape {
  /** CLAIM_SHARD_COUNT, as the Worker reads it (src/claims/routing.ts shardCount). */
  shardCount: number;
  /** The receipt partitions' ring (src/sources/partitions.ts), when the deployment has a valid one. */
  partitions: Pick<ReceiptPartitions, "periodMs" | "spread" | "periods" | "keepMs"> | null;
}

/** The group of every partitioned source: never a binding name (those are identifiers, this has a space). */
const RING = "the receipt partitions";

type Sharing = { source: SourceConfig; rate: number; report: CapacityReport }[];

const days = (ms: number) => `${Number((ms / DAY_MS).toFixed(2))}d`;
const perSecond = (rate: number) => `${rate.toLocaleString("en-US")}/s`;

export function capacityWarnings(
  sources: Iterable<SourceConfig>,
  deployment: DeploymentShape,
  figures: PerEventFigures,
): string[] {
  const warnings: string[] = [];
  const byDatabase = new Map<string, Sharing>();
  const all = [...sources];
  // A partitioned source's receipts stay in D1 for the ring's SQL window (`keep`), its keys in the shards for longer.
  const ringWindowMs = deployment.partitions ? sqlWindowMs(deployment.partitions, all) : null;
  for (const source of all) {
    const rate = expectedRate(source.options as Record<string, unknown>);
    if (rate === null) continue;
    const report = capacity(
      {
        eventsPerSecond: rate,
        bodyBytes: 0,
        keyRetentionMs: source.dedupeRetentionMs,
        payloadRetentionMs: source.payloadRetentionMs,
        sqlWindowMs:
          isPartitioned(source) && ringWindowMs !== null ? Math.min(ringWindowMs, source.dedupeRetentionMs) : null,
        archiveRetentionMs: null,
        bodies: "r2",
        shards: Math.min(deployment.shardCount, PUBLISHED_LIMITS.claimShardsPerSource),
        databases: null,
        // Queries are added up per database over every source writing there (queryWarnings), not per source.
        spread: 1,
      },
      figures,
    );
    warnings.push(...shardWarnings(source, rate, report, deployment.shardCount, figures));
    // Partitioned sources share the ring, whatever its databases are named; the others their own binding.
    const home = isPartitioned(source) ? RING : source.database;
    const sharing = byDatabase.get(home) ?? [];
    sharing.push({ source, rate, report });
    byDatabase.set(home, sharing);
  }
  const ring = byDatabase.get(RING);
  byDatabase.delete(RING);
  if (ring && deployment.partitions) warnings.push(...ringWarnings(ring, deployment.partitions, figures));
  for (const [binding, sharing] of byDatabase) {
    const bytes = sharing.reduce((total, entry) => total + entry.report.d1.bytes, 0);
    if (bytes <= PUBLISHED_LIMITS.d1DatabaseBytes) continue;
    const who = sharing.map(
      ({ source, rate }) => `${source.name} (${perSecond(rate)}, ${days(source.dedupeRetentionMs)})`,
    );
    // How many days of these sources' receipts one database holds: what a smaller dedupe_retention would have to be.
    const rateBytesPerDay = bytes / (sharing[0]?.report.d1.daysHeld ?? 1);
    const sameRetention = sharing.every((entry) => entry.report.d1.daysHeld === sharing[0]?.report.d1.daysHeld);
    const holds = sameRetention
      ? ` (one holds ${days((PUBLISHED_LIMITS.d1DatabaseBytes / rateBytesPerDay) * DAY_MS)} of them at these rates)`
      : "";
    warnings.push(
      `database ${binding}: the expected_rate of ${who.join(", ")} keeps ${byteSize(bytes)} of receipts ` +
        `(${figures.d1BytesPerReceipt} bytes each for its dedupe_retention, bodies not counted), more than one D1 ` +
        `database's ${byteSize(PUBLISHED_LIMITS.d1DatabaseBytes)}${holds}: ${databaseChange(sharing)}, or shorten dedupe_retention`,
    );
  }
  warnings.push(
    ...queryWarnings(
      byDatabase,
      ring && deployment.partitions ? { ring, partitions: deployment.partitions } : null,
      figures,
    ),
  );
  const ringBytes = ring && deployment.partitions ? ringBytesAtFullest(ring, deployment.partitions) : 0;
  const accountBytes =
    ringBytes + [...byDatabase.values()].flat().reduce((total, entry) => total + entry.report.d1.bytes, 0);
  if (accountBytes > PUBLISHED_LIMITS.d1AccountBytes)
    warnings.push(
      `D1: the expected_rate of every source keeps ${byteSize(accountBytes)} of receipts, more than the ` +
        `${byteSize(PUBLISHED_LIMITS.d1AccountBytes)} one account may store: ${accountChange(byDatabase, ringBytes)}`,
    );
  return warnings;
}

/**
 * What brings every source's receipts under the account's 1 TB while their keys are kept as long: a shorter SQL
 * window, past which receipts go to the R2 archive and the claim shards alone keep the keys. The unpartitioned
 * sources are named largest first until the rest would fit; the ring's window is `keep`.
 */
function accountChange(byDatabase: Map<string, Sharing>, ringBytes: number): string {
  const largestFirst = [...byDatabase.values()].flat().sort((a, b) => b.report.d1.bytes - a.report.d1.bytes);
  let rest = ringBytes + largestFirst.reduce((total, entry) => total + entry.report.d1.bytes, 0);
  const named: string[] = [];
  for (const entry of largestFirst) {
    if (rest <= PUBLISHED_LIMITS.d1AccountBytes) break;
    named.push(entry.source.name);
    rest -= entry.report.d1.bytes;
  }
  const changes = [
    ...(named.length > 0 ? [`partition the receipts of ${named.join(", ")} (database = "partitions")`] : []),
    ...(ringBytes > 0 ? ["shorten RECEIPT_PARTITIONS.keep"] : []),
  ];
  return (
    `${changes.join(", and ")}: receipts older than the SQL window go to the R2 archive and the claim shards keep ` +
    "their keys; or shorten dedupe_retention"
  );
}

/**
 * What makes the receipts of sources sharing one database fit. A source that alone outgrows a database gains nothing
 * from a database of its own: its receipts need the ring of partitions. The rest, if they still do not fit together,
 * need databases of their own.
 */
function databaseChange(sharing: Sharing): string {
  const limit = PUBLISHED_LIMITS.d1DatabaseBytes;
  const alone = sharing.filter((entry) => entry.report.d1.bytes > limit);
  const rest = sharing.filter((entry) => entry.report.d1.bytes <= limit);
  const restBytes = rest.reduce((total, entry) => total + entry.report.d1.bytes, 0);
  const ownDatabases =
    rest.length === sharing.length ? "give each source its own database" : "give the others databases of their own";
  if (alone.length === 0) return `${ownDatabases} (database = "…")`;
  const names = alone.map((entry) => entry.source.name).join(", ");
  return (
    `partition the receipts of ${names} (database = "partitions": a ring of databases with an SQL window, ` +
    `docs/operating.md "Receipts in time partitions")${restBytes > limit ? `, ${ownDatabases} (database = "…")` : ""}`
  );
}

/**
 * Query time: every source on a binding writes its receipts to that one database, so their queries' time adds up
 * there, against the 1,000 ms a second a database has to run them one at a time (queryMsPerEvent: about 1 ms a call,
 * or the measured execution time when longer); the ring's sources share each period's `spread` databases. Nothing is
 * said when the figures carry no `d1Calls`.
 */
function queryWarnings(
  byDatabase: Map<string, Sharing>,
  partitioned: { ring: Sharing; partitions: DeploymentShape["partitions"] & object } | null,
  figures: PerEventFigures,
): string[] {
  const limit = PUBLISHED_LIMITS.d1QueryMsPerSecond;
  const serves = `above the ${limit.toLocaleString("en-US")} ms a second one D1 database has, running one query at a time`;
  const msOf = (sharing: Sharing) =>
    sharing.reduce((total, entry) => total + (entry.report.d1.queryMsPerSecond ?? 0), 0);
  const asked = (sharing: Sharing, perDatabase: number) =>
    `the expected_rate of ${sharing.map(({ source, rate }) => `${source.name} (${perSecond(rate)})`).join(", ")} asks ` +
    `about ${Math.round(perDatabase).toLocaleString("en-US")} ms of query time a second (${+(queryMsPerEvent(figures) ?? 0).toFixed(3)} ms an event)`;
  const warnings: string[] = [];
  for (const [binding, sharing] of byDatabase) {
    const perDatabase = msOf(sharing);
    if (perDatabase <= limit) continue;
    warnings.push(
      `database ${binding}: ${asked(sharing, perDatabase)} of it, ${serves}: partition the receipts ` +
        '(database = "partitions") over a ring with spread, or split the traffic over sources on databases of their own',
    );
  }
  if (partitioned) {
    const { ring, partitions } = partitioned;
    const total = msOf(ring);
    const perDatabase = total / partitions.spread;
    if (perDatabase > limit)
      warnings.push(
        `RECEIPT_PARTITIONS: ${asked(ring, perDatabase)} of ${partitions.spread === 1 ? "the one database" : `each of the ${partitions.spread} databases`} a period ` +
          `is written to, ${serves}: raise spread to ${Math.ceil(total / limit)} (with that many databases for each ` +
          "period in the ring)",
      );
  }
  return warnings;
}

function shardWarnings(
  source: SourceConfig,
  rate: number,
  report: CapacityReport,
  configured: number,
  figures: PerEventFigures,
): string[] {
  const { shards } = report;
  const where = `SOURCES.${source.name}: expected_rate ${perSecond(rate)}`;
  const change =
    shards.needed > PUBLISHED_LIMITS.claimShardsPerSource
      ? `more than the ${PUBLISHED_LIMITS.claimShardsPerSource.toLocaleString("en-US")} one source may have: split its traffic over several sources, or shorten dedupe_retention`
      : `raise CLAIM_SHARD_COUNT to ${shards.needed} (at most ${PUBLISHED_LIMITS.claimShardsPerSource.toLocaleString("en-US")}; ${SHARD_COUNT_CHANGE})`;
  const warnings: string[] = [];
  if (shards.bytesPerShard > PUBLISHED_LIMITS.durableObjectBytes)
    warnings.push(
      `${where} at dedupe_retention ${days(source.dedupeRetentionMs)} keeps ${byteSize(shards.tombstoneBytes)} of ` +
        `tombstones (${figures.shardBytesPerTombstone} bytes each, for up to two windows): CLAIM_SHARD_COUNT = ${configured} ` +
        `holds ${byteSize(configured * PUBLISHED_LIMITS.durableObjectBytes)} at ${byteSize(PUBLISHED_LIMITS.durableObjectBytes)} a shard: ${change}`,
    );
  if (shards.requestsPerSecondPerShard > PUBLISHED_LIMITS.durableObjectRequestsPerSecond)
    warnings.push(
      `${where} asks ${Math.round(shards.requestsPerSecondPerShard).toLocaleString("en-US")} requests a second of each of ` +
        `its ${configured} claim shards, above the ${PUBLISHED_LIMITS.durableObjectRequestsPerSecond.toLocaleString("en-US")} one ` +
        `Durable Object serves: ${change}`,
    );
  return warnings;
}

/** One period's receipts of the partitioned sources: what a period's databases hold between them. */
function periodBytes(ring: Sharing, partitions: DeploymentShape["partitions"] & object): number {
  // A receipt's bytes over the model's days held, times the days of a period: the same rate, a shorter window.
  return ring.reduce(
    (total, { report }) => total + (report.d1.bytes / report.d1.daysHeld) * (partitions.periodMs / DAY_MS),
    0,
  );
}

/** At the fullest every database of the ring holds a period's receipts but the one emptied ahead of its turn. */
function ringBytesAtFullest(ring: Sharing, partitions: DeploymentShape["partitions"] & object): number {
  return periodBytes(ring, partitions) * (partitions.periods - 1);
}

function ringWarnings(
  ring: Sharing,
  partitions: DeploymentShape["partitions"] & object,
  figures: PerEventFigures,
): string[] {
  const perDatabase = periodBytes(ring, partitions) / partitions.spread;
  if (perDatabase <= PUBLISHED_LIMITS.d1DatabaseBytes) return [];
  const spreadNeeded = Math.ceil((perDatabase * partitions.spread) / PUBLISHED_LIMITS.d1DatabaseBytes);
  const who = ring.map(({ source, rate }) => `${source.name} (${perSecond(rate)})`).join(", ");
  return [
    `RECEIPT_PARTITIONS: the expected_rate of ${who} writes ${byteSize(perDatabase)} of receipts (${figures.d1BytesPerReceipt} bytes each) ` +
      `into each ring database in one period of ${days(partitions.periodMs)} over spread = ${partitions.spread}, more than one ` +
      `D1 database's ${byteSize(PUBLISHED_LIMITS.d1DatabaseBytes)}: raise spread to ${spreadNeeded} (with ${spreadNeeded} ` +
      "databases for each period in the ring), or shorten period and add databases so (periods − 2) × period still covers keep (unset, the longest dedupe_retention)",
  ];
}
