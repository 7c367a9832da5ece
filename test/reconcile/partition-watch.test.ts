import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ulid } from "../../src/lib/ulid";
import { partitionDatabaseOf, receiptPartitionsOf } from "../../src/sources/partitions";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique, withOnlySources } from "./support";

/** The cron's watch covers a partitioned source: its numbers are added up over the ring, its cursors kept in DB. */
describe("the watch of a partitioned source", () => {
  it("opens the dead-letter alert for a dead letter in a partition database", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const source = "partitioned";
    const alertOpen = async () =>
      (await env.DB.prepare(
        "SELECT COUNT(*) AS count FROM alerts WHERE source = ? AND kind = 'dead-letters' AND state = 'open'",
      )
        .bind(source)
        .first<{ count: number }>())!.count;
    expect((await cronRun(Date.now(), withOnlySources(source))).failures).toBeNull();
    expect(await alertOpen()).toBe(0);

    const now = Date.now();
    const receiptId = ulid(now - 60_000);
    const parsed = receiptPartitionsOf(env);
    if (!parsed.ok || !parsed.partitions) throw new Error("the test ring is not configured");
    const home = partitionDatabaseOf(parsed.partitions, receiptId) as "DB_P0" | "DB_P1" | "DB_P2" | "DB_P3";
    await env[home]
      .prepare(
        `INSERT INTO receipts (id, source, event_key, event_type, payload_sha256, received_at, relayed_at, status, attempts, lease_generation)
         VALUES (?, ?, ?, 'account.credited', ?, ?, ?, 'dead', 13, 13)`,
      )
      .bind(receiptId, source, `msg_watch_${unique()}`, "0".repeat(64), now - 60_000, now - 60_000)
      .run();
    expect((await cronRun(now + 1, withOnlySources(source))).failures).toBeNull();
    expect(await alertOpen()).toBe(1);
  });
});
