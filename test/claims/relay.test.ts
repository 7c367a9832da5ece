import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RELAY_BATCH_BYTES } from "../../src/claims/claim-table";
import { shardFor } from "../../src/claims/routing";
import { credit, eventually, post, signDemo } from "../support/deliveries";
import { breakShardBindings, countingQueue, relayFailures, unreachableD1 } from "../support/failpoints";
import { keysInOneShard, settle, settleEachTest } from "../support/storage";

/** Relay batching: a backlog drains in bounded batches, by count and by bytes, until nothing is left. */

/** Holds a shard's relay back (D1 unreachable) while `deliver` runs, then lets the alarm drain the backlog. */
async function withBacklog(keys: string[], deliver: () => Promise<void>): Promise<void> {
  const shard = shardFor(env, "demo", keys[0]!);
  const restore = await breakShardBindings(shard, { DB: unreachableD1() });
  await deliver();
  await eventually(async () => ((await relayFailures(shard)) > 0 ? true : undefined), 10_000, "a failed relay");
  expect(await shard.unrelayedCount()).toBe(keys.length);
  await restore();
  await runDurableObjectAlarm(shard);
  await settle(30_000);
  expect(await shard.unrelayedCount()).toBe(0);
}

async function relayBatches(prefix: string) {
  const { results } = await env.DB.prepare(
    `SELECT relayed_at AS relayedAt, COUNT(*) AS receipts, SUM(length(body)) AS bytes FROM receipts
     WHERE source = 'demo' AND event_key LIKE ? GROUP BY relayed_at ORDER BY relayed_at`,
  )
    .bind(`${prefix}%`)
    .all<{ relayedAt: number; receipts: number; bytes: number }>();
  return results;
}

settleEachTest();

describe("relay batches", () => {
  it("drains a backlog larger than one batch, 50 at a time, every receipt once", async () => {
    const keys = keysInOneShard("msg_backlog", 120);
    await withBacklog(keys, async () => {
      const answers = await Promise.all(
        keys.map((eventKey) => {
          const body = JSON.stringify(credit("acct_backlog", 1));
          return post("/webhooks/demo", body, signDemo(eventKey, body));
        }),
      );
      expect(answers.every((response) => response.status === 200)).toBe(true);
    });
    const batches = await relayBatches("msg_backlog");
    expect(batches.map((batch) => batch.receipts)).toEqual([50, 50, 20]);
    const credited = await env.DB.prepare("SELECT credits FROM accounts WHERE id = 'acct_backlog'").first<{
      credits: number;
    }>();
    expect(credited?.credits).toBe(120);
  });

  it("bounds each batch by bytes as well, so large bodies never pile into one relay", async () => {
    const keys = keysInOneShard("msg_large_body", 6);
    await withBacklog(keys, async () => {
      for (const eventKey of keys) {
        const body = JSON.stringify({ ...credit("acct_large_body", 2), padding: "x".repeat(900_000) });
        const response = await post("/webhooks/demo", body, signDemo(eventKey, body));
        expect(response.status).toBe(200);
      }
    });
    const batches = await relayBatches("msg_large_body");
    expect(batches.reduce((sum, batch) => sum + batch.receipts, 0)).toBe(6);
    expect(batches.length).toBeGreaterThan(1);
    // Bodies this large are kept in R2 (src/bodies/stored-bodies.ts), not in the row: count the bytes each batch moved.
    const bodyBytes = new TextEncoder().encode(
      JSON.stringify({ ...credit("acct_large_body", 2), padding: "x".repeat(900_000) }),
    ).byteLength;
    for (const batch of batches) expect(batch.receipts * bodyBytes).toBeLessThanOrEqual(RELAY_BATCH_BYTES);
    const credited = await env.DB.prepare("SELECT credits FROM accounts WHERE id = 'acct_large_body'").first<{
      credits: number;
    }>();
    expect(credited?.credits).toBe(12);
  });

  it("shares one batch between overlapping relays, so each receipt is sent to the queue once", async () => {
    const keys = keysInOneShard("msg_overlap", 10);
    const shard = shardFor(env, "demo", keys[0]!);
    const restoreD1 = await breakShardBindings(shard, { DB: unreachableD1() });
    await Promise.all(
      keys.map((eventKey) => {
        const body = JSON.stringify(credit("acct_overlap", 1));
        return post("/webhooks/demo", body, signDemo(eventKey, body));
      }),
    );
    await eventually(async () => ((await relayFailures(shard)) > 0 ? true : undefined), 10_000, "a failed relay");
    await restoreD1();

    const sent: string[] = [];
    const restoreQueue = await breakShardBindings(shard, (current) => ({
      WORK_QUEUE: countingQueue(current.WORK_QUEUE, sent),
    }));
    // The alarm's retry, the cron's sweep and an operator's call, all at once.
    const reports = await Promise.all([shard.relay(), shard.relay(), shard.relay()]);
    expect(reports.map((report) => report.receiptsRelayed)).toEqual([10, 10, 10]);
    await runDurableObjectAlarm(shard);
    await settle();
    await restoreQueue();
    expect(sent).toHaveLength(10);
    expect(new Set(sent).size).toBe(10);
    const credited = await env.DB.prepare("SELECT credits FROM accounts WHERE id = 'acct_overlap'").first<{
      credits: number;
    }>();
    expect(credited?.credits).toBe(10);
  });
});
