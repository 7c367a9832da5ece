import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sourcesHealth } from "../../src/sources/registry";

/** `[vars.RECEIPT_PARTITIONS]` and `database = "partitions"`: what the ring refuses, each with a message that says why. */

const partitioned = {
  provider: "standard-webhooks",
  secrets: ["DEMO_WEBHOOK_SECRET"],
  destination: "https://example.com/hook",
  database: "partitions",
  dedupe_retention: "2d",
  payload_retention: "1d",
};

/** The test ring without `keep`: the SQL window is then the longest dedupe_retention, as before `keep` existed. */
const { keep: _keep, ...RING } = env.RECEIPT_PARTITIONS;

/** `ring` "none": a Worker without RECEIPT_PARTITIONS. */
function problemsWith(sources: Record<string, unknown>, ring: unknown = RING) {
  const { RECEIPT_PARTITIONS: _ring, ...withoutRing } = env;
  const configured = (ring === "none"
    ? { ...withoutRing, SOURCES: sources }
    : { ...env, SOURCES: sources, RECEIPT_PARTITIONS: ring }) as unknown as Env;
  return sourcesHealth(configured);
}

describe("receipt partition config", () => {
  it("accepts a partitioned source whose retention the ring holds", () => {
    expect(problemsWith({ ringed: partitioned })).toMatchObject({ valid: ["ringed"], invalid: {} });
  });

  it("refuses a partitioned source with an in-Worker handler, saying its effects must share one D1 batch", () => {
    const health = problemsWith({ ringed: { ...partitioned, destination: "handler:accounts" } });
    expect(health.invalid.ringed?.join(" ")).toMatch(
      /route default: destination handler:accounts cannot run on database = "partitions": a handler's effect rows and the receipt's commit guard must be written in one D1 batch/,
    );
  });

  it("refuses a retention the ring cannot hold: (periods − 2) × period must cover it", () => {
    const health = problemsWith({ ringed: { ...partitioned, dedupe_retention: "3d" } });
    expect(health.invalid.ringed?.join(" ")).toMatch(
      /dedupe_retention \(3d\) is longer than RECEIPT_PARTITIONS keeps a receipt: 4 periods of 1d, .* = 2d; add databases or lengthen period/,
    );
    // The same source fits a ring with a longer period.
    expect(
      problemsWith({ ringed: { ...partitioned, dedupe_retention: "3d" } }, { ...RING, period: "2d" }).valid,
    ).toEqual(["ringed"]);
  });

  it("refuses a ring that names a database the Worker has no binding for, or DB", () => {
    const health = problemsWith({ ringed: partitioned }, { databases: ["DB_P0", "DB_P9", "DB"], period: "1d" });
    const problems = health.invalid.ringed?.join(" ");
    expect(problems).toMatch(/RECEIPT_PARTITIONS\.databases: "DB_P9" is not a D1 binding of this Worker/);
    expect(problems).toMatch(/RECEIPT_PARTITIONS\.databases cannot include DB/);
  });

  it("refuses a spread that does not divide the databases, and an unreadable period", () => {
    const problems = problemsWith(
      { ringed: partitioned },
      { databases: ["DB_P0", "DB_P1", "DB_P2"], period: "1 day", spread: 2 },
    ).invalid.ringed?.join(" ");
    expect(problems).toMatch(/RECEIPT_PARTITIONS\.spread \(2\) must divide the number of databases \(3\)/);
    expect(problems).toMatch(
      /RECEIPT_PARTITIONS\.period must be a duration longer than zero, like "1d" or "12h" \(got "1 day"\)/,
    );
  });

  it('refuses database = "partitions" without a ring', () => {
    expect(problemsWith({ ringed: partitioned }, "none").invalid.ringed).toEqual([
      'SOURCES.ringed: database = "partitions" needs a [vars.RECEIPT_PARTITIONS] table with databases and period',
    ]);
  });

  it("refuses a source of its own database that names one of the ring's, and leaves the others alone", () => {
    const health = problemsWith({
      ringed: partitioned,
      squatter: { ...partitioned, database: "DB_P2", destination: "none" },
    });
    expect(health.valid).toEqual(["ringed"]);
    expect(health.invalid.squatter?.join(" ")).toMatch(
      /database "DB_P2" is one of RECEIPT_PARTITIONS\.databases, which retention empties whole/,
    );
  });

  it("lets keep, the SQL window, be shorter than dedupe_retention: the claim shards keep the keys", () => {
    const longKeys = { ...partitioned, dedupe_retention: "30d", dead_letter_retention: "2d" };
    expect(problemsWith({ ringed: longKeys }, { ...RING, keep: "2d" })).toMatchObject({ valid: ["ringed"] });
    // Without keep the window is the longest dedupe_retention, which the ring of 4 days cannot hold: refused as before.
    expect(problemsWith({ ringed: longKeys }).invalid.ringed?.join(" ")).toMatch(
      /dedupe_retention \(30d\) is longer than RECEIPT_PARTITIONS keeps a receipt: .* set RECEIPT_PARTITIONS\.keep .* to 2d or less/,
    );
  });

  it("refuses a keep the ring cannot hold, or shorter than what a receipt must still answer in D1", () => {
    const uncovered = problemsWith({ ringed: partitioned }, { ...RING, keep: "3d" }).invalid.ringed?.join(" ");
    expect(uncovered).toMatch(
      /RECEIPT_PARTITIONS\.keep \(3d\) is longer than the ring holds a receipt: 4 periods of 1d, .* = 2d; add databases, lengthen period or shorten keep/,
    );
    const short = problemsWith({ ringed: partitioned }, { ...RING, keep: "12h" }).invalid.ringed?.join(" ");
    expect(short).toMatch(/payload_retention \(1d\) is longer than RECEIPT_PARTITIONS\.keep \(12h\)/);
    // Unset, dead_letter_retention is the key's 2 days: a dead letter must stay replayable in D1 that long.
    expect(short).toMatch(
      /dead_letter_retention \(2d, unset it is dedupe_retention\) is longer than RECEIPT_PARTITIONS\.keep \(12h\): .* set dead_letter_retention to 12h or less, or lengthen keep/,
    );
    expect(problemsWith({ ringed: partitioned }, { ...RING, keep: "soon" }).invalid.ringed?.join(" ")).toMatch(
      /RECEIPT_PARTITIONS\.keep must be a duration longer than zero, how long a receipt stays in D1, like "7d" \(got "soon"\)/,
    );
  });
});
