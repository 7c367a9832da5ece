/**
 * `capacity` and the capacity warnings of `check` (src/capacity/), run as a user runs them. Neither needs a receiver:
 * capacity reads only the per-event figures, check only the config. Exact figures come from test/capacity/round-figures.json
 * (500 bytes a receipt, 250 a tombstone), each expected value derived by hand; the checked-in
 * bench/results/per-event.json is read as is where only the shape of the answer is asserted.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { cli, makeWorkDir, ROOT, testConfig, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => rmSync(workDir, { recursive: true, force: true }));

/** 500 bytes a receipt, 250 a tombstone, one shard request per event (and a field the reader does not know). */
const figures = join(ROOT, "test", "capacity", "round-figures.json");

/** One line on stderr, exit 2: a bad command line. */
function assertUsageError(
  /** @type {{ code: number, stdout: string, stderr: string }} */ result,
  /** @type {RegExp} */ pattern,
) {
  assert.equal(result.code, 2, result.stdout + result.stderr);
  assert.match(result.stderr.trim(), pattern);
  assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
}

describe("capacity", () => {
  test("--json: shards, databases and R2 for 1,000 events/s of 3 KB bodies, from the figures file", async () => {
    const result = await cli([
      "capacity",
      "--rate",
      "1000",
      "--body-bytes",
      "3000",
      "--sql-window",
      "7d",
      "--figures",
      figures,
      "--json",
    ]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    // Tombstones: 1000/s × 86400 s × 70 days × 250 B = 1.512e12 B, over 10 × 1024³ B a shard: 141.
    assert.equal(report.shards.tombstoneBytes, 1_512_000_000_000);
    assert.equal(report.shards.needed, 141);
    // Receipts: 1000/s × 86400 s × 7 days × 500 B = 3.024e11 B, 29 databases; bodies in R2 for 7 days.
    assert.equal(report.d1.bytes, 302_400_000_000);
    assert.equal(report.d1.databasesNeeded, 29);
    assert.equal(report.r2.bodyBytes, 1000 * 86_400 * 7 * 3000);
    assert.equal(report.binding.limit, "D1 storage of the account (1 TB on Workers Paid)");
    assert.equal(report.fits, true);
  });

  test("prints each store, every limit with the binding one marked, and the monthly cost", async () => {
    const result = await cli(["capacity", "--rate", "1000", "--body-bytes", "3000", "--figures", figures]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^claim shards\s+1\.38 TB of tombstones at the fullest\s+141 needed \(141 for storage, 1 for requests\)$/m,
    );
    assert.match(
      result.stdout,
      /^the source's one database \(10 GB; its receipts are not partitioned\)\s+1\.38 TB\s+10 GB\s+14,082 %\s+← binds$/m,
    );
    assert.match(
      result.stdout,
      /^does not fit: the source's one database .*: partition the source's receipts over 141 or more databases/m,
    );
    assert.match(result.stdout, /^total \(2,592 million events a 30-day month\)\s+\$[\d,]+\s+\$\d+\.\d\d$/m);
  });

  test("--spread: a period's receipts written to two databases halve the query time each one takes", async () => {
    // 0.07 D1 calls an event at 20,000/s and no execution time measured: 1,400 queries a second at about 1 ms each,
    // so 1,400 ms of query time a second, 700 for each of two databases.
    const base = ["capacity", "--figures", figures, "--rate", "20000", "--body-bytes", "3000", "--sql-window", "2d"];
    const one = await cli(base);
    assert.match(
      one.stdout,
      /^query time of each database a period's receipts are written to \(spread = 1; .*\)\s+1,400 ms\/s\s+1,000 ms\/s\s+140 %/m,
    );
    const two = await cli([...base, "--spread", "2"]);
    assert.equal(two.code, 0, two.stderr);
    assert.match(
      two.stdout,
      /1400 queries\/s, 1400 ms of query time a second; 700 queries\/s and 700 ms\/s each of the 2 a period is written to$/m,
    );
    assert.match(
      two.stdout,
      /^query time of each database a period's receipts are written to \(spread = 2; .*\)\s+700 ms\/s\s+1,000 ms\/s\s+70 %/m,
    );
    assertUsageError(
      await cli([...base, "--spread", "two"]),
      /^error: --spread must be a whole number of databases a period is written to, such as 2 \(got "two"\)$/,
    );
    assertUsageError(
      await cli(["capacity", "--figures", figures, "--rate", "10", "--body-bytes", "3000", "--spread", "2"]),
      /^error: a spread needs an SQL window: without partitions a source's receipts go to one database$/,
    );
  });

  test("reads the checked-in figures by default", async () => {
    const result = await cli(["capacity", "--rate", "1e1", "--body-bytes", "3000"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^per-event figures: bench\/results\/per-event\.json \(npm run bench -- --only meters .*, at [0-9a-f]{7,40}.*\)$/m,
    );
    assert.match(result.stdout, /^capacity of one source at 10 events\/s, 3,000-byte bodies in R2;/m);
    assert.match(result.stdout, /← binds$/m);
  });

  test("refuses bad input with one line naming it", async () => {
    const base = ["capacity", "--figures", figures];
    assertUsageError(
      await cli([...base, "--rate=-5", "--body-bytes", "3000"]),
      /^error: the rate \(events a second\) must be a number above 0 \(got -5\)$/,
    );
    assertUsageError(
      await cli([...base, "--rate", "lots", "--body-bytes", "3000"]),
      /^error: --rate must be a number of events a second, such as 1000 \(got "lots"\)$/,
    );
    assertUsageError(
      await cli([...base, "--rate", "10", "--body-bytes", "3000", "--key-retention", "5 weeks"]),
      /^error: --key-retention must be a duration such as "35d", "12h" or "90m" \(got "5 weeks"\)$/,
    );
    assertUsageError(
      await cli([...base, "--body-bytes", "3000"]),
      /^error: capacity needs --rate <events\/s> and --body-bytes <bytes>$/,
    );
    assertUsageError(
      await cli([...base, "--rate", "10", "--body-bytes", "3000", "--bodies", "kv"]),
      /^error: --bodies must be r2 or d1 \(got "kv"\)$/,
    );
    const missing = await cli([
      "capacity",
      "--rate",
      "10",
      "--body-bytes",
      "3000",
      "--figures",
      `${workDir}/none.json`,
    ]);
    assert.equal(missing.code, 4, missing.stderr);
    assert.match(missing.stderr, /^error: no per-event figures at .*none\.json: the bench's meters phase writes them/);
  });
});

describe("check with expected_rate", () => {
  const source = (/** @type {string} */ name, /** @type {string} */ rate) =>
    `\n[vars.SOURCES.${name}]\nprovider = "standard-webhooks"\nsecrets = ["DEMO_WEBHOOK_SECRET"]\nexpected_rate = ${rate}\n`;

  test("warns naming the store, the figure and what to change when the shards or the database cannot hold the rate", async () => {
    const config = writeFile(
      workDir,
      "busy.toml",
      testConfig(9) + source("cli-busy", "1000") + source("cli-quiet", "0.01"),
    );
    const result = await cli(["check", "--config-only", "--config", config]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(
      result.stdout,
      /^warn {2}SOURCES\.cli-busy: expected_rate 1,000\/s at dedupe_retention 35d keeps [\d.]+ [GT]B of tombstones \(\d+ bytes each, for up to two windows\): CLAIM_SHARD_COUNT = 8 holds 80 GB at 10 GB a shard: raise CLAIM_SHARD_COUNT to \d+ \(at most 1,024; with \[vars\.CLAIM_SHARD_PREVIOUS\], docs\/operating\.md "Changing the shard count or a source's placement"\)$/m,
    );
    assert.match(
      result.stdout,
      /^warn {2}database DB: the expected_rate of cli-busy \(1,000\/s, 35d\), cli-quiet \(0\.01\/s, 35d\) keeps [\d.]+ [GT]B of receipts .* more than one D1 database's 10 GB .*: partition the receipts of cli-busy \(database = "partitions": .*\), or shorten dedupe_retention$/m,
    );
    assert.doesNotMatch(result.stdout, /SOURCES\.cli-quiet: expected_rate/);
  });

  test("holds partitioned sources against one period's receipts in each ring database", async () => {
    // Four ring databases of 20 days, spread 1: (4 − 2) × 20 days keeps 35 days of keys. 50 events/s of 20 days is
    // 86.4 million receipts a database, well past 10 GB at any figure above 125 bytes a receipt.
    const ring = ["DB_P0", "DB_P1", "DB_P2", "DB_P3"];
    const bindings = ring.map(
      (binding) =>
        `\n[[d1_databases]]\nbinding = "${binding}"\ndatabase_name = "${binding.toLowerCase()}"\ndatabase_id = "00000000-0000-0000-0000-00000000000${ring.indexOf(binding)}"\n`,
    );
    const partitioned = `\n[vars.SOURCES.cli-ring]\nprovider = "standard-webhooks"\nsecrets = ["DEMO_WEBHOOK_SECRET"]\ndatabase = "partitions"\nexpected_rate = 50\n`;
    const ringTable = `\n[vars.RECEIPT_PARTITIONS]\ndatabases = ${JSON.stringify(ring)}\nperiod = "20d"\nspread = 1\n`;
    const config = writeFile(workDir, "ring.toml", testConfig(9) + partitioned + ringTable + bindings.join(""));
    const result = await cli(["check", "--config-only", "--config", config]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(result.stdout, /^ok .*cli-ring/m);
    assert.match(
      result.stdout,
      /^warn {2}RECEIPT_PARTITIONS: the expected_rate of cli-ring \(50\/s\) writes [\d.]+ GB of receipts \(\d+ bytes each\) into each ring database in one period of 20d over spread = 1, more than one D1 database's 10 GB: raise spread to \d+ .*$/m,
    );
    assert.doesNotMatch(result.stdout, /database partitions|database DB:/);
  });

  test("says nothing of capacity for a rate its stores hold", async () => {
    const config = writeFile(workDir, "quiet.toml", testConfig(9) + source("cli-quiet", "0.5"));
    const result = await cli(["check", "--config-only", "--config", config]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.doesNotMatch(result.stdout, /^warn/m);
  });

  test("fails a source whose expected_rate is not a rate", async () => {
    const config = writeFile(workDir, "typo.toml", testConfig(9) + source("cli-typo", '"1k/s"'));
    const result = await cli(["check", "--config-only", "--config", config]);
    assert.equal(result.code, 1, result.stdout + result.stderr);
    assert.match(
      result.stdout,
      /^FAIL {2}SOURCES\.cli-typo: expected_rate must be a number of events a second above 0, such as 25 or 0\.5 \(got "1k\/s"\)$/m,
    );
  });
});
