import {
  createExecutionContext,
  createMessageBatch,
  evictDurableObject,
  getQueueResult,
  runDurableObjectAlarm,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { receiptDetail } from "../../src/admin/receipts/receipt-detail";
import { shardFor } from "../../src/claims/routing";
import { database } from "../../src/db/client";
import worker from "../../src/index";
import { OVERDUE_GRACE_MS } from "../../src/reconcile/redrive";
import { CRON_TEST_TIMEOUT_MS, runCron, withOnlySources } from "../reconcile/support";
import { account, credit, eventually, post, signDemo, waitForStatus } from "../support/deliveries";
import {
  breakShardBindings,
  failCommitFor,
  lossyQueue,
  relayFailures,
  unreachableD1,
  unreachableQueue,
} from "../support/failpoints";
import { keysInOneShard, processedCount, receiptsFor, settle, settleEachTest, shardClaim } from "../support/storage";

/**
 * The three crash windows, each with a real failure injected at the boundary, and each followed by the recovery
 * the product relies on (the shard's alarm, a re-enqueue, the queue's retry). Afterwards every event is
 * processed exactly once and none is lost.
 */

const SOURCE = "fast-retry";
type Answer = { status: string; receipt: string };

function deliver(eventKey: string, payload: unknown): Promise<Response> {
  const body = JSON.stringify(payload);
  return post(`/webhooks/${SOURCE}`, body, signDemo(eventKey, body));
}

async function expectExactlyOnce(eventKeys: readonly string[], accountId: string, credits: number) {
  await settle();
  for (const eventKey of eventKeys) {
    expect(await receiptsFor(SOURCE, eventKey), eventKey).toEqual([expect.objectContaining({ status: "processed" })]);
    expect(await processedCount(SOURCE, eventKey), eventKey).toBe(1);
  }
  expect((await account(accountId))?.credits).toBe(credits);
}

settleEachTest();

describe("crash window 1: after the claim, before the relay", () => {
  it("acknowledges while D1 is unreachable, keeps every claim, and lands each exactly once when D1 is back", async () => {
    const keys = keysInOneShard("msg_d1_outage", 5);
    const shard = shardFor(env, SOURCE, keys[0]!);
    const restore = await breakShardBindings(shard, { DB: unreachableD1() });

    const answers = await Promise.all(keys.map((eventKey) => deliver(eventKey, credit("acct_d1_outage", 10))));
    expect(answers.map((response) => response.status)).toEqual(keys.map(() => 200));
    for (const response of answers) expect((await response.json<Answer>()).status).toBe("accepted");

    // The alarm really ran and really failed against the unreachable D1.
    await eventually(async () => ((await relayFailures(shard)) > 0 ? true : undefined), 10_000, "a failed relay");
    // Dedupe does not need D1: a retry during the outage is still a duplicate.
    expect((await (await deliver(keys[0]!, credit("acct_d1_outage", 10))).json<Answer>()).status).toBe("duplicate");
    expect(await shard.unrelayedCount()).toBe(keys.length);
    for (const eventKey of keys) expect(await receiptsFor(SOURCE, eventKey)).toEqual([]);
    expect(await account("acct_d1_outage")).toBeNull();

    await restore();
    await runDurableObjectAlarm(shard);
    await expectExactlyOnce(keys, "acct_d1_outage", 50);
    expect(await relayFailures(shard)).toBe(0);
    for (const eventKey of keys) expect((await shardClaim(SOURCE, eventKey))?.relayed).toBe(true);
  });

  it("keeps acknowledged claims through the loss of the shard instance itself", async () => {
    const keys = keysInOneShard("msg_shard_lost", 3);
    const shard = shardFor(env, SOURCE, keys[0]!);
    await breakShardBindings(shard, { DB: unreachableD1() });
    for (const eventKey of keys)
      expect((await (await deliver(eventKey, credit("acct_shard_lost", 7))).json<Answer>()).status).toBe("accepted");
    await eventually(async () => ((await relayFailures(shard)) > 0 ? true : undefined), 10_000, "a failed relay");

    // Memory is gone; only what the shard stored survives. The next instance is built with the real bindings.
    await evictDurableObject(shard);
    await runDurableObjectAlarm(shard);
    await expectExactlyOnce(keys, "acct_shard_lost", 21);
  });

  it("writes D1 but fails the queue send: the next alarm enqueues what D1 already holds, once", async () => {
    const keys = keysInOneShard("msg_queue_outage", 3);
    const shard = shardFor(env, SOURCE, keys[0]!);
    const restore = await breakShardBindings(shard, { WORK_QUEUE: unreachableQueue() });
    for (const eventKey of keys)
      expect((await (await deliver(eventKey, credit("acct_queue_outage", 4))).json<Answer>()).status).toBe("accepted");
    await eventually(async () => ((await relayFailures(shard)) > 0 ? true : undefined), 10_000, "a failed relay");

    // The receipts reached D1, but nothing is on the queue and the shard still owes the relay.
    for (const eventKey of keys) {
      expect(await receiptsFor(SOURCE, eventKey)).toEqual([
        expect.objectContaining({ status: "pending", attempts: 0 }),
      ]);
    }
    expect(await shard.unrelayedCount()).toBe(keys.length);

    await restore();
    await runDurableObjectAlarm(shard);
    await expectExactlyOnce(keys, "acct_queue_outage", 12);
  });
});

describe("crash window 2: after the relay, before processing", () => {
  it("finishes a receipt whose queue message was lost, once, when the cron's re-drive finds it", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const [eventKey] = keysInOneShard("msg_lost_message", 1);
    const shard = shardFor(env, SOURCE, eventKey!);
    const restore = await breakShardBindings(shard, { WORK_QUEUE: lossyQueue() });
    const accepted = await (await deliver(eventKey!, credit("acct_lost_message", 15))).json<Answer>();
    expect(accepted.status).toBe("accepted");

    // Relayed and marked enqueued, but the message went nowhere: the receipt waits in D1.
    await eventually(async () => ((await shardClaim(SOURCE, eventKey!))?.relayed ? true : undefined));
    await restore();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await receiptsFor(SOURCE, eventKey!)).toEqual([
      expect.objectContaining({ receiptId: accepted.receipt, status: "pending", attempts: 0 }),
    ]);
    expect(await account("acct_lost_message")).toBeNull();

    // Nothing else will send it again: the cron's re-drive does, once the receipt has waited past its grace period.
    // Two runs at once, as overlapping crons would: one claims it, and it is applied once.
    const later = Date.now() + OVERDUE_GRACE_MS + 60_000;
    await Promise.all([runCron(later, withOnlySources(SOURCE)), runCron(later + 1, withOnlySources(SOURCE))]);
    expect(await waitForStatus(SOURCE, eventKey!)).toBe("processed");
    await new Promise((resolve) => setTimeout(resolve, 500));
    await expectExactlyOnce([eventKey!], "acct_lost_message", 15);
  });

  it("acks a duplicate queue message for a processed receipt and applies nothing", async () => {
    const [eventKey] = keysInOneShard("msg_duplicate_message", 1);
    const accepted = await (await deliver(eventKey!, credit("acct_duplicate_message", 9))).json<Answer>();
    await waitForStatus(SOURCE, eventKey!);
    const before = await receiptsFor(SOURCE, eventKey!);

    const batch = createMessageBatch(`webhook-work`, [
      { id: "duplicate-1", timestamp: new Date(), attempts: 1, body: { receiptId: accepted.receipt } },
      { id: "duplicate-2", timestamp: new Date(), attempts: 3, body: { receiptId: accepted.receipt } },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch as MessageBatch<{ receiptId: string }>, env);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(["duplicate-1", "duplicate-2"]);
    expect(result.retryMessages).toEqual([]);

    expect(await receiptsFor(SOURCE, eventKey!)).toEqual(before);
    await expectExactlyOnce([eventKey!], "acct_duplicate_message", 9);
  });
});

describe("crash window 3: inside processing, before the commit", () => {
  it("rolls back a handler's writes when the commit fails, and the queue's retry applies them once", async () => {
    const keys = keysInOneShard("msg_commit_fail", 2);
    const removeFailpoint = await failCommitFor("msg_commit_fail");
    try {
      for (const eventKey of keys) {
        expect((await (await deliver(eventKey, credit("acct_commit_fail", 100))).json<Answer>()).status).toBe(
          "accepted",
        );
      }
      // The attempt ran the credit inside the batch, then the last statement failed: everything rolled back.
      await eventually(
        async () => {
          const { results } = await env.DB.prepare(
            `SELECT status, attempts, last_error AS lastError FROM receipts WHERE source = ? AND event_key LIKE 'msg_commit_fail%'`,
          )
            .bind(SOURCE)
            .all<{ status: string; attempts: number; lastError: string | null }>();
          return results.length === keys.length &&
            results.every((row) => row.attempts >= 1 && row.lastError?.includes("injected failure"))
            ? results
            : undefined;
        },
        15_000,
        "a failed attempt for each receipt",
      );
      expect(await account("acct_commit_fail")).toBeNull();
      for (const eventKey of keys) expect(await processedCount(SOURCE, eventKey)).toBe(0);
    } finally {
      await removeFailpoint();
    }

    // No one re-enqueues anything: the queue's own retry (1 s for this source) finishes the work.
    for (const eventKey of keys) expect(await waitForStatus(SOURCE, eventKey)).toBe("processed");
    await expectExactlyOnce(keys, "acct_commit_fail", 200);
    const [first] = await receiptsFor(SOURCE, keys[0]!);
    const attempts = (await receiptDetail(database(env), first!.receiptId))!.attempts;
    expect(attempts.at(0)).toMatchObject({ outcome: "retry" });
    expect(attempts.at(-1)).toMatchObject({ outcome: "processed", error: null });
  });
});
