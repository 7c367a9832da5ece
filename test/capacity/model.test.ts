import { describe, expect, it } from "vitest";
import { type CapacityInput, capacity, DEFAULT_INPUT } from "../../src/capacity/model";
import { CapacityInputError, perEventFigures } from "../../src/capacity/per-event";
import ROUND_FIGURES from "./round-figures.json";

/**
 * The capacity model (src/capacity/model.ts) on round figures, each expected value derived by hand from the inputs
 * and the published limits (10 GB = 10 × 1024³ bytes a database or a shard, 1 TB = 1024⁴ an account, 1,000
 * requests a second a shard, at most 1,024 shards), never read back from the model.
 */

const GB = 1024 ** 3;
const TB = 1024 ** 4;
const DAY_S = 86_400;

/** 500 bytes a receipt, 250 a tombstone; 3 D1 and 2 shard rows written, one request of each kind per event. */
const MEASURED = ROUND_FIGURES;
const FIGURES = perEventFigures(MEASURED, "the test's figures");

const at = (eventsPerSecond: number, more: Partial<CapacityInput> = {}) =>
  capacity({ ...DEFAULT_INPUT, eventsPerSecond, bodyBytes: 3000, ...more }, FIGURES);

describe("D1", () => {
  it("holds 1 event/s in one database: 35 days of 500-byte receipts is 1.512 GB", () => {
    const report = at(1);
    expect(report.d1.bytes).toBe(1 * DAY_S * 35 * 500);
    expect(report.d1.databasesNeeded).toBe(1);
    expect(report.fits).toBe(true);
    expect(report.binding.limit).toMatch(/the source's one database/);
    expect(report.binding.fill).toBeCloseTo(1_512_000_000 / (10 * GB), 12);
  });

  it("cannot hold 3 KB bodies at 1,000/s: with bodies in D1 the account's 1 TB binds", () => {
    const report = at(1000, { bodies: "d1", sqlWindowMs: 7 * DAY_S * 1000 });
    // 7 days of receipts and of bodies: 1000 × 86400 × 7 × (500 + 3000) bytes.
    expect(report.d1.bytes).toBe(2_116_800_000_000);
    expect(report.fits).toBe(false);
    expect(report.binding.limit).toMatch(/D1 storage of the account/);
    expect(report.binding.fill).toBeCloseTo(2_116_800_000_000 / TB, 12);
    expect(report.binding.change).toMatch(/keep bodies in R2/);
  });

  it("holds 1,000/s with bodies in R2 and a 7-day SQL window: 1.8 TB of bodies in R2, 302 GB of receipts in D1", () => {
    const report = at(1000, { sqlWindowMs: 7 * DAY_S * 1000 });
    expect(report.r2.bodyBytes).toBe(1000 * DAY_S * 7 * 3000);
    expect(report.d1.bytes).toBe(302_400_000_000);
    expect(report.d1.databasesNeeded).toBe(Math.ceil(302_400_000_000 / (10 * GB)));
    expect(report.d1.databasesNeeded).toBe(29);
    // The archive holds days 7 to 35 of each receipt, at the receipt's bytes (the figures give no archive size).
    expect(report.r2.archiveBytes).toBe(1000 * DAY_S * 28 * 500);
    expect(report.fits).toBe(true);
    expect(report.binding.limit).toMatch(/D1 storage of the account/);
  });

  it("names the one database when the receipts are not partitioned, and says to partition them", () => {
    const report = at(1000);
    expect(report.binding.limit).toMatch(/the source's one database/);
    expect(report.binding.fill).toBeCloseTo(1_512_000_000_000 / (10 * GB), 9);
    expect(report.binding.change).toMatch(/partition the source's receipts over 141 or more databases/);
    expect(report.fits).toBe(false);
  });
});

describe("D1 query time", () => {
  const twoDays = 2 * DAY_S * 1000;
  const queryCheck = (report: ReturnType<typeof at>) => report.limits.find((check) => check.unit === "ms/s")!;

  it("falls on the database a period is written to: 0.07 calls an event at 20,000/s is 1,400 ms a second, past 1,000", () => {
    const query = queryCheck(at(20_000, { sqlWindowMs: twoDays }));
    expect(query.used).toBeCloseTo(1_400, 9);
    expect(query.fill).toBeCloseTo(1.4, 9);
    expect(query.limit).toMatch(/spread = 1/);
    expect(query.change).toMatch(/RECEIPT_PARTITIONS\.spread = 2/);
  });

  it("is shared by the databases a period is spread over: a spread of 2 takes 700 ms a second each", () => {
    const report = at(20_000, { sqlWindowMs: twoDays, spread: 2 });
    expect(report.d1.queriesPerSecond).toBeCloseTo(1_400, 9);
    expect(report.d1.queriesPerSecondPerDatabase).toBeCloseTo(700, 9);
    const query = queryCheck(report);
    expect(query.used).toBeCloseTo(700, 9);
    expect(query.fill).toBeCloseTo(0.7, 9);
    expect(query.limit).toMatch(/spread = 2/);
  });

  it("says to partition a source whose one database is past it", () => {
    const query = queryCheck(at(20_000));
    expect(query.fill).toBeCloseTo(1.4, 9);
    expect(query.change).toMatch(/partition the source's receipts \(--sql-window\) over 2 databases a period/);
  });

  const withExecution = (d1ExecutionMs: number) =>
    perEventFigures({ ...MEASURED, d1ExecutionMs }, "the test's figures");
  const atWith = (d1ExecutionMs: number, eventsPerSecond: number, more: Partial<CapacityInput> = {}) =>
    capacity({ ...DEFAULT_INPUT, eventsPerSecond, bodyBytes: 3000, ...more }, withExecution(d1ExecutionMs));

  it("takes the measured execution time when the calls run longer than 1 ms: 0.2 ms an event at 10,000/s is 2,000 ms a second", () => {
    // The count alone (0.07 calls, 700 queries a second) would fit; the calls' time does not, and needs a spread of 2.
    const report = atWith(0.2, 10_000, { sqlWindowMs: twoDays });
    expect(report.d1.queriesPerSecond).toBeCloseTo(700, 9);
    expect(report.d1.queryMsPerSecond).toBeCloseTo(2_000, 9);
    const query = queryCheck(report);
    expect(query.used).toBeCloseTo(2_000, 9);
    expect(query.fill).toBeCloseTo(2, 9);
    expect(query.change).toMatch(/RECEIPT_PARTITIONS\.spread = 2/);
    expect(queryCheck(atWith(0.2, 10_000, { sqlWindowMs: twoDays, spread: 2 })).fill).toBeCloseTo(1, 9);
  });

  it("keeps about 1 ms a call when the measured execution is shorter: 0.01 ms an event counts as 0.07", () => {
    const query = queryCheck(atWith(0.01, 20_000, { sqlWindowMs: twoDays }));
    expect(query.used).toBeCloseTo(1_400, 9);
  });
});

describe("claim shards", () => {
  it("grow with the rate: two key windows of 250-byte tombstones over 10 GB shards", () => {
    // 70 days × 86400 s × 250 bytes = 1.512 GB per event/s.
    expect([10, 100, 1000].map((rate) => at(rate).shards.needed)).toEqual([2, 15, 141]);
    expect(at(1000).shards.tombstoneBytes).toBe(1000 * DAY_S * 70 * 250);
  });

  it("at 10,000/s one source needs 1,409, past the 1,024 it may have: the shard count binds", () => {
    const report = at(10_000, { sqlWindowMs: DAY_S * 1000 });
    expect(report.shards.needed).toBe(1409);
    expect(report.shards.neededForRequests).toBe(10);
    expect(report.binding.limit).toMatch(/claim shards of one source/);
    expect(report.fits).toBe(false);
  });

  it("holds a configured CLAIM_SHARD_COUNT against 10 GB and 1,000 requests a second each", () => {
    const report = at(1000, { shards: 8, sqlWindowMs: DAY_S * 1000 });
    const storage = report.limits.find((entry) => entry.limit.startsWith("one claim shard's storage"));
    expect(storage?.used).toBe(1_512_000_000_000 / 8);
    expect(storage?.change).toBe(
      `raise CLAIM_SHARD_COUNT to 141 (with [vars.CLAIM_SHARD_PREVIOUS], docs/operating.md "Changing the shard count or a source's placement")`,
    );
    const requests = report.limits.find((entry) => entry.limit.startsWith("one claim shard's request rate"));
    expect(requests?.used).toBe(125);
    expect(report.binding).toBe(storage);
  });

  it("needs shards for requests when tombstones are small: 5,000 requests a second is 5 shards", () => {
    const lean = perEventFigures({ ...MEASURED, shardBytesPerTombstone: 1 }, "lean figures");
    const report = capacity({ ...DEFAULT_INPUT, eventsPerSecond: 5000, bodyBytes: 0 }, lean);
    expect(report.shards.neededForRequests).toBe(5);
    expect(report.shards.needed).toBe(5);
  });
});

describe("cost", () => {
  // Per event, USD per million: requests 0.30 + 0.15; rows written 3 + 2 at $1; D1 storage 500 B × 35/30 month ×
  // $0.75/GB; shard storage 250 B × 52.5/30 month × $0.20/GB; R2 storage 3000 B × 7/30 month × $0.015/GB.
  const perEvent = 0.45 + 5 + 0.4375 + 0.0875 + 0.0105;
  // A shard awake all month: 0.128 GB × 2,592,000 s × $12.50 per million GB-s.
  const shardMonth = 0.128 * 2_592_000 * 12.5e-6;

  it("is the per-event units at list prices, plus the shards' duration", () => {
    const report = at(1000, { shards: 200 });
    expect(report.cost.eventsPerMonth).toBe(2_592_000_000);
    expect(report.cost.usdPerMonth).toBeCloseTo(perEvent * 2592 + 200 * shardMonth, 6);
    expect(report.cost.usdPerMillion).toBeCloseTo(perEvent + (200 * shardMonth) / 2592, 9);
  });

  it("scales linearly with the rate, the shards' duration apart", () => {
    const once = at(1000, { shards: 200 }).cost.usdPerMonth - 200 * shardMonth;
    const twice = at(2000, { shards: 200 }).cost.usdPerMonth - 200 * shardMonth;
    expect(twice).toBeCloseTo(2 * once, 6);
    expect(once).toBeCloseTo(perEvent * 2592, 6);
  });
});

describe("bad input", () => {
  it.each([
    [{ eventsPerSecond: -5 }, /the rate \(events a second\) must be a number above 0 \(got -5\)/],
    [{ eventsPerSecond: 0 }, /the rate .* above 0/],
    [{ bodyBytes: -1 }, /the body size must be a number of bytes, 0 or more/],
    [{ payloadRetentionMs: 40 * DAY_S * 1000 }, /payload retention cannot outlast the key retention/],
    [{ sqlWindowMs: 36 * DAY_S * 1000 }, /SQL window cannot outlast the key retention/],
    [{ shards: 2000 }, /shard count must be a whole number from 1 to 1024/],
    [{ databases: 4 }, /a database count needs an SQL window/],
    [{ spread: 2 }, /a spread needs an SQL window/],
    [{ spread: 0, sqlWindowMs: 2 * DAY_S * 1000 }, /the spread must be a whole number from 1/],
    [
      { spread: 3, databases: 4, sqlWindowMs: 2 * DAY_S * 1000 },
      /the spread \(3\) must divide the databases \(4\), as in RECEIPT_PARTITIONS/,
    ],
  ])("refuses %o", (more, message) => {
    expect(() => at(1, more as Partial<CapacityInput>)).toThrow(CapacityInputError);
    expect(() => at(1, more as Partial<CapacityInput>)).toThrow(message);
  });
});

describe("the per-event figures", () => {
  it("ignore fields they do not know and name each fallback they used", () => {
    const figures = perEventFigures(
      { ...MEASURED, newMeter: 42, rowsWritten: { ...MEASURED.rowsWritten, kv: { accept: 1 } } },
      "figures",
    );
    expect(figures.d1BytesPerReceipt).toBe(500);
    expect(figures.fallbacks).toContain("archiveBytesPerReceipt absent: 500");
    expect(figures.fallbacks).toContain("queueOperations absent: 0");
  });

  it("refuse a file without the bytes or the command that measured them, naming each", () => {
    expect(() => perEventFigures({ shardBytesPerTombstone: 250 }, "x.json")).toThrow(
      /x\.json: measuredBy must name the command and the commit .*; d1BytesPerReceipt must be a number, 0 or more \(got undefined\); rowsWritten must be an object/,
    );
  });
});
