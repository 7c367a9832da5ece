import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { perEventFigures } from "../../src/capacity/per-event";
import { capacityWarnings, type DeploymentShape } from "../../src/capacity/source-capacity";
import { loadSources } from "../../src/sources/registry";
import ROUND_FIGURES from "./round-figures.json";

/**
 * `cli check`'s capacity warnings (src/capacity/source-capacity.ts) on the round figures: 0.07 D1 queries an event and
 * no execution time, so 0.07 ms of query time an event at about 1 ms a query, and one database's 1,000 ms a second is
 * reached at 14,286 events a second. Each expectation is derived by hand.
 */

const FIGURES = perEventFigures(ROUND_FIGURES, "the test's figures");
const table = (more: Record<string, unknown>) => ({
  provider: "standard-webhooks",
  secrets: ["DEMO_WEBHOOK_SECRET"],
  dedupe_retention: "1d",
  payload_retention: "1d",
  ...more,
});
const RING = { periodMs: 86_400_000, spread: 1, periods: 4, keepMs: 2 * 86_400_000 };

function warningsFor(sources: Record<string, unknown>, partitions: DeploymentShape["partitions"] = null): string[] {
  const loaded = loadSources({ ...env, SOURCES: sources } as Env);
  expect([...loaded.keys()].sort()).toEqual(Object.keys(sources).sort());
  return capacityWarnings(loaded.values(), { shardCount: 1024, partitions }, FIGURES);
}

const queryWarnings = (warnings: string[]) => warnings.filter((line) => line.includes("ms of query time a second"));

describe("query time of the database receipts are written to", () => {
  it("adds up the sources on one binding: 10,000/s and 5,000/s ask 1,050 ms a second of DB", () => {
    const warnings = queryWarnings(
      warningsFor({ "qr-big": table({ expected_rate: 10_000 }), "qr-small": table({ expected_rate: 5_000 }) }),
    );
    expect(warnings).toEqual([
      'database DB: the expected_rate of qr-big (10,000/s), qr-small (5,000/s) asks about 1,050 ms of query time a second (0.07 ms an event) of it, above the 1,000 ms a second one D1 database has, running one query at a time: partition the receipts (database = "partitions") over a ring with spread, or split the traffic over sources on databases of their own',
    ]);
  });

  it("says nothing while each database stays under: the same two sources on DB and DB_SECOND", () => {
    const warnings = warningsFor({
      "qr-big": table({ expected_rate: 10_000 }),
      "qr-small": table({ expected_rate: 5_000, database: "DB_SECOND" }),
    });
    expect(queryWarnings(warnings)).toEqual([]);
  });

  it("divides the ring's query time by its spread: 20,000/s asks 1,400 ms a second of one database, 700 of each of two", () => {
    const sources = { "qr-ring": table({ expected_rate: 20_000, database: "partitions" }) };
    expect(queryWarnings(warningsFor(sources, RING))).toEqual([
      "RECEIPT_PARTITIONS: the expected_rate of qr-ring (20,000/s) asks about 1,400 ms of query time a second (0.07 ms an event) of the one database a period is written to, above the 1,000 ms a second one D1 database has, running one query at a time: raise spread to 2 (with that many databases for each period in the ring)",
    ]);
    expect(queryWarnings(warningsFor(sources, { ...RING, spread: 2, periods: 8 }))).toEqual([]);
  });

  it("counts the measured execution time when calls run longer than 1 ms: 0.2 ms an event at 6,000/s is 1,200 ms a second", () => {
    // 0.07 calls an event would ask only 420 queries a second; the calls' own time is what fills the database.
    const slower = perEventFigures({ ...ROUND_FIGURES, d1ExecutionMs: 0.2 }, "the test's figures");
    const loaded = loadSources({ ...env, SOURCES: { "qr-slow": table({ expected_rate: 6_000 }) } } as Env);
    const warnings = queryWarnings(capacityWarnings(loaded.values(), { shardCount: 1024, partitions: null }, slower));
    expect(warnings).toEqual([
      'database DB: the expected_rate of qr-slow (6,000/s) asks about 1,200 ms of query time a second (0.2 ms an event) of it, above the 1,000 ms a second one D1 database has, running one query at a time: partition the receipts (database = "partitions") over a ring with spread, or split the traffic over sources on databases of their own',
    ]);
  });
});

describe("receipts past one database's 10 GB", () => {
  // 500 bytes a receipt kept 1 day: 43.2 MB per event a second, so one database (10 × 1024³ bytes) holds 248.5/s.
  const storageWarnings = (warnings: string[]) => warnings.filter((line) => line.startsWith("database DB:"));
  const PARTITION =
    'partition the receipts of big (database = "partitions": a ring of databases with an SQL window, docs/operating.md "Receipts in time partitions")';

  it("sends a source that alone outgrows a database to the partitions, not to a database of its own", () => {
    const [warning, ...more] = storageWarnings(warningsFor({ big: table({ expected_rate: 300 }) }));
    expect(more).toEqual([]);
    // 300/s × 86,400 s × 500 bytes = 12.96e9 bytes, 12.1 GB in the binary units the limit is stated in.
    expect(warning).toMatch(/keeps 12\.1 GB of receipts/);
    expect(warning).toContain(`: ${PARTITION}, or shorten dedupe_retention`);
  });

  it("gives sources that each fit but not together databases of their own", () => {
    const [warning] = storageWarnings(
      warningsFor({ left: table({ expected_rate: 150 }), right: table({ expected_rate: 150 }) }),
    );
    expect(warning).toMatch(/: give each source its own database \(database = "…"\), or shorten dedupe_retention$/);
  });

  it("says both when the others still do not fit once the large one is partitioned", () => {
    const [warning] = storageWarnings(
      warningsFor({
        big: table({ expected_rate: 300 }),
        left: table({ expected_rate: 150 }),
        right: table({ expected_rate: 150 }),
      }),
    );
    expect(warning).toContain(
      `: ${PARTITION}, give the others databases of their own (database = "…"), or shorten dedupe_retention`,
    );
    // With big and left alone, left fits in DB by itself once big is partitioned: no second clause.
    const [two] = storageWarnings(
      warningsFor({ big: table({ expected_rate: 300 }), left: table({ expected_rate: 150 }) }),
    );
    expect(two).toContain(`: ${PARTITION}, or shorten dedupe_retention`);
  });
});

describe("receipts past the account's 1 TB", () => {
  const accountWarnings = (warnings: string[]) => warnings.filter((line) => line.startsWith("D1:"));
  const WINDOW =
    ": receipts older than the SQL window go to the R2 archive and the claim shards keep their keys; or shorten dedupe_retention";

  it("names the unpartitioned sources to partition, largest first, only as many as it takes", () => {
    // 35 days of 500-byte receipts is 1.512 GB per event a second: big (1,000/s) alone is 1.512e12 bytes, past
    // 1024⁴ = 1.0995e12; small (10/s, 15.1 GB) fits once big is partitioned, so it is not named.
    const warnings = accountWarnings(
      warningsFor({
        small: table({ expected_rate: 10, dedupe_retention: "35d" }),
        big: table({ expected_rate: 1_000, dedupe_retention: "35d" }),
      }),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      `one account may store: partition the receipts of big (database = "partitions")${WINDOW}`,
    );
  });

  it("says to shorten the ring's keep when the ring is what fills it", () => {
    // A period of 10,000/s is 432 GB; at the fullest three of the ring's four periods are held: 1.296e12 bytes.
    const warnings = accountWarnings(
      warningsFor({ "ring-big": table({ expected_rate: 10_000, database: "partitions" }) }, RING),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`one account may store: shorten RECEIPT_PARTITIONS.keep${WINDOW}`);
  });
});
