import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import worker from "../../src/index";
import type { QueuedWork } from "../../src/model/work-message";
import { account, eventually, PIPELINE_WAIT_MS, post, signDemo } from "../support/deliveries";
import { testEnv } from "./support/handlers";
import { attemptRows, receiptRow, seedReceipt, standinRequests } from "./support/processing";

/**
 * Until the receipt's next attempt is due and no lease holds it, read from its row: the retry's delay is the
 * policy's second with jitter, and a loaded machine can hold a lease past it, so no fixed sleep is long enough.
 */
async function untilDue(receiptId: string): Promise<void> {
  await eventually(
    async () => {
      const row = await receiptRow(receiptId);
      const now = Date.now();
      return (row.nextAttemptAt ?? 0) <= now && (row.leaseUntil ?? 0) <= now ? true : undefined;
    },
    PIPELINE_WAIT_MS,
    `receipt ${receiptId}'s next attempt to be due, with no lease on it`,
  );
}

async function runQueue(queue: string, receiptIds: string[], runEnv: Env = testEnv, deliveries = 1) {
  const batch = createMessageBatch<QueuedWork>(
    queue,
    receiptIds.map((receiptId, index) => ({
      id: `msg_${index}_${receiptId}`,
      timestamp: Date.now(),
      attempts: deliveries,
      body: { receiptId },
    })),
  );
  // The test harness records that a message was retried but not its delay: note the delay on the way through.
  const retryDelays: Record<string, number | undefined> = {};
  for (const message of batch.messages) {
    const retry = message.retry.bind(message);
    message.retry = (options) => {
      retryDelays[message.id] = options?.delaySeconds;
      retry(options);
    };
  }
  const ctx = createExecutionContext();
  await worker.queue(batch, runEnv, ctx);
  return { ...(await getQueueResult(batch, ctx)), retryDelays };
}

async function statusCounts(source: string): Promise<Record<string, number>> {
  const { results } = await env.DB.prepare(
    "SELECT status, COUNT(*) AS n FROM receipts WHERE source = ? GROUP BY status",
  )
    .bind(source)
    .all<{ status: string; n: number }>();
  return Object.fromEntries(results.map((row) => [row.status, row.n]));
}

describe("a poison event never blocks the others", () => {
  it("returns 500 for one event on purpose: it lands dead while the 999 behind it flow through the real queue", {
    timeout: 240_000,
  }, async () => {
    const startedAt = Date.now();
    const source = "proc-forward-poison";
    const deliver = (eventKey: string, payload: unknown) => {
      const body = JSON.stringify(payload);
      return post(`/webhooks/${source}`, body, signDemo(eventKey, body));
    };
    // The poison goes first, so every good event is behind it.
    expect((await deliver("evt_poison", { type: "order.paid", poison: true })).status).toBe(200);
    const goodKeys = Array.from({ length: 999 }, (_, index) => `evt_good_${index}`);
    for (let start = 0; start < goodKeys.length; start += 50) {
      const answers = await Promise.all(
        goodKeys.slice(start, start + 50).map((key, offset) => deliver(key, { type: "order.paid", n: start + offset })),
      );
      expect(answers.every((answer) => answer.status === 200)).toBe(true);
    }
    const acknowledgedAt = Date.now();

    const settled = await eventually(
      async () => {
        const counts = await statusCounts(source);
        return counts.processed === 999 && counts.dead === 1 ? counts : undefined;
      },
      200_000,
      "999 processed and 1 dead",
    );
    expect(settled).toEqual({ processed: 999, dead: 1 });
    console.log(
      `1,000 deliveries acknowledged in ${acknowledgedAt - startedAt} ms; all settled ${Date.now() - acknowledgedAt} ms later`,
    );

    const poison = await env.DB.prepare(
      "SELECT id, last_error AS lastError, body FROM receipts WHERE source = ? AND event_key = 'evt_poison'",
    )
      .bind(source)
      .first<{ id: string; lastError: string; body: number[] | ArrayBuffer }>();
    expect(poison!.lastError).toBe("gave up after 3 attempts: destination answered 500");
    expect(poison!.body).not.toBeNull();
    const poisonAttempts = await attemptRows(poison!.id);
    expect(poisonAttempts.map((attempt) => [attempt.outcome, attempt.httpStatus])).toEqual([
      ["retry", 500],
      ["retry", 500],
      ["dead", 500],
    ]);
    // The good events did not wait for the poison's retries to run out.
    const { flowedMeanwhile } = (await env.DB.prepare(
      "SELECT COUNT(*) AS flowedMeanwhile FROM receipts WHERE source = ? AND status = 'processed' AND processed_at < ?",
    )
      .bind(source, poisonAttempts[2]!.startedAt)
      .first<{ flowedMeanwhile: number }>())!;
    expect(flowedMeanwhile).toBeGreaterThan(0);
    // Each good event reached the destination exactly once.
    const sample = await env.DB.prepare(
      "SELECT id FROM receipts WHERE source = ? AND status = 'processed' ORDER BY random() LIMIT 20",
    )
      .bind(source)
      .all<{ id: string }>();
    for (const { id } of sample.results)
      expect((await standinRequests(id)).map((request) => request.answer)).toEqual([200]);
  });

  it("acks a batch's messages, sends only the failing receipt back on its own schedule, until it is dead", async () => {
    const good = await Promise.all(
      Array.from({ length: 24 }, (_, index) =>
        seedReceipt({ source: "proc-handler-fast", payload: { account: `acct_batch_${index}`, amount: 3 } }),
      ),
    );
    const poison = await seedReceipt({
      source: "proc-handler-fast",
      payload: { account: "acct_batch_poison", amount: 3, fail: "transient" },
    });
    const messages = [...good.slice(0, 12), poison, ...good.slice(12)];

    const first = await runQueue("webhook-work", messages);
    // Every message is acknowledged: the failing receipt goes back on the queue in a message of its own, with its
    // own delay, so the 24 good ones are never delivered again.
    expect(first.explicitAcks).toHaveLength(25);
    expect(first.retryMessages).toEqual([]);
    for (let index = 0; index < 24; index++) expect((await account(`acct_batch_${index}`))?.credits).toBe(3);
    const scheduled = await receiptRow(poison);
    expect(scheduled).toMatchObject({ status: "pending", attempts: 1 });
    expect(scheduled.nextAttemptAt).not.toBeNull();

    for (const expected of ["pending", "dead"] as const) {
      await untilDue(poison);
      const again = await runQueue("webhook-work", [poison]);
      expect(again.explicitAcks).toHaveLength(1);
      expect((await receiptRow(poison)).status).toBe(expected);
    }
    expect(await receiptRow(poison)).toMatchObject({
      status: "dead",
      lastError: "gave up after 3 attempts: deliberate failure, as a 500 would be",
      hasBody: 1,
    });
    expect(await account("acct_batch_poison")).toBeNull();
  });

  it("sends a handler's validation failure straight to dead after one attempt", async () => {
    const receiptId = await seedReceipt({
      source: "proc-handler",
      payload: { account: "acct_invalid", amount: 1, fail: "permanent" },
    });
    const result = await runQueue("webhook-work", [receiptId]);
    expect(result.explicitAcks).toHaveLength(1);
    expect(await receiptRow(receiptId)).toMatchObject({
      status: "dead",
      lastError: "amount is not a number",
      attempts: 1,
      hasBody: 1,
    });
  });
});

describe("a consumer that cannot start", () => {
  it("leaves the receipt untouched and brings the message back later, within the queue's 12 h limit", async () => {
    const receiptId = await seedReceipt({
      source: "proc-handler",
      payload: { account: "acct_broken_config", amount: 1 },
    });
    // SOURCES that is not a table at all: no source can be read, so nothing may be started.
    const broken = { ...env, SOURCES: "not a table" } as unknown as Env;

    const first = await runQueue("webhook-work", [receiptId], broken);
    expect(first.retryMessages).toHaveLength(1);
    const firstDelay = Object.values(first.retryDelays)[0]!;
    expect(firstDelay).toBeGreaterThanOrEqual(24);
    expect(firstDelay).toBeLessThanOrEqual(36);
    const late = await runQueue("webhook-work", [receiptId], broken, 40);
    expect(Object.values(late.retryDelays)).toEqual([43_200]);

    expect(await receiptRow(receiptId)).toMatchObject({ status: "pending", attempts: 0, leaseUntil: null });
    expect(await attemptRows(receiptId)).toEqual([]);
  });
});

describe("the dead-letter queue", () => {
  it("marks receipts the work queue gave up on as dead, keeping payload and leaving finished ones alone", async () => {
    const stuck = await seedReceipt({ source: "proc-handler", payload: { account: "acct_dlq", amount: 1 } });
    const finished = await seedReceipt({
      source: "proc-handler",
      payload: { account: "acct_dlq_done", amount: 1 },
      status: "processed",
    });
    const result = await runQueue("webhook-work-dead", [stuck, finished], env);
    expect(result.explicitAcks.sort()).toEqual([`msg_0_${stuck}`, `msg_1_${finished}`].sort());
    expect(await receiptRow(stuck)).toMatchObject({
      status: "dead",
      lastError: "work queue gave up after 1 deliveries",
      hasBody: 1,
    });
    expect((await receiptRow(finished)).status).toBe("processed");
  });

  it("names the handler a source needs when it no longer exists, and dead-letters the receipt", async () => {
    const { registerHandler } = await import("../../src/handlers/registry");
    const { envWithSources, handlerSource } = await import("./support/processing");
    const { processReceipt } = await import("../../src/consumers/receipts/process");
    const unregister = registerHandler("test-removed-later", async () => ({ outcome: "skip", reason: "unused" }));
    const runEnv = envWithSources({ "proc-removed": handlerSource("test-removed-later") });
    const receiptId = await seedReceipt({ source: "proc-removed", payload: {} });
    const { loadSources } = await import("../../src/sources/registry");
    loadSources(runEnv);
    unregister();
    expect(await processReceipt(runEnv, receiptId)).toEqual({ kind: "done", status: "dead" });
    expect((await receiptRow(receiptId)).lastError).toBe("no handler named test-removed-later");
  });
});
