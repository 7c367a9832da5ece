import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { outboundIdempotencyKey } from "../../src/consumers/attempt/external-calls";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { processReceipt } from "../../src/consumers/receipts/process";
import worker from "../../src/index";
import { type QueuedWork, receiptIdsOf } from "../../src/model/work-message";
import { account } from "../support/deliveries";
import { hangNextRun, testEnv } from "./support/handlers";
import {
  attemptRows,
  envWithSources,
  receiptRow,
  seedFurtherDelivery,
  seedReceipt,
  standinOrigin,
  standinRequests,
} from "./support/processing";

/**
 * An event whose attempt kills the isolate (it runs out of memory, or of CPU) never gets to record a failure. What
 * the next delivery sees is an attempt that started and never finished: a message redelivered by the queue, a
 * lease still held or run out. Here a run that is stopped mid-attempt and never resumed is that crash, and each
 * delivery after it is the real consumer entry point called the way the queue calls it. The durable count of
 * attempts started must be what ends the loop, and the event's batch-mates must finish.
 */

const STILL_RUNNING = Symbol("still running");

/** The outcome, or STILL_RUNNING when the run is hung in an attempt (as the old loop would be). */
async function settled<T>(run: Promise<T>, withinMs = 5_000): Promise<T | typeof STILL_RUNNING> {
  return Promise.race([
    run,
    new Promise<typeof STILL_RUNNING>((resolve) => setTimeout(() => resolve(STILL_RUNNING), withinMs)),
  ]);
}

async function generationOf(receiptId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT lease_generation AS generation FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ generation: number }>();
  return row!.generation;
}

async function history(receiptId: string) {
  return (await attemptRows(receiptId)).map(({ attemptNumber, outcome }) => [attemptNumber, outcome]);
}

describe("an event that crashes its consumer every time", () => {
  it("with a lease: counts each crashed attempt when its lease was taken, and dead-letters it once the retries are spent", async () => {
    // proc-external-fast allows 2 retries: 3 attempts in all.
    const eventKey = "evt_poison_leased";
    const receiptId = await seedReceipt({
      source: "proc-external-fast",
      eventKey,
      payload: { account: "acct_poison_leased", callUrl: `${standinOrigin()}/script/200`, timeoutMs: 1500 },
    });
    let now = Date.now();
    for (let crash = 1; crash <= 3; crash++) {
      // The attempt takes the lease with its external call, then its isolate dies: it never resumes.
      const crashed = hangNextRun(eventKey);
      void processReceipt(testEnv, receiptId, now);
      await crashed.entered;
      expect(await generationOf(receiptId)).toBe(crash);
      expect((await receiptRow(receiptId)).attempts).toBe(crash);
      // Redelivered while the lease holds: it waits for the lease, runs nothing.
      expect(await processReceipt(testEnv, receiptId, now + 1000)).toEqual({
        kind: "retry",
        delaySeconds: LEASE_MS / 1000,
      });
      now += LEASE_MS + 1;
    }

    // The next delivery would crash it again; the count says it has had its three attempts.
    hangNextRun(eventKey);
    expect(await settled(processReceipt(testEnv, receiptId, now))).toEqual({ kind: "done", status: "dead" });
    expect(await receiptRow(receiptId)).toMatchObject({ status: "dead", attempts: 3, leaseUntil: null, hasBody: 1 });
    expect((await receiptRow(receiptId)).lastError).toMatch(
      /^gave up after 3 attempts: lease expired before the attempt finished/,
    );
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "notify"))).toHaveLength(3);
    expect(await history(receiptId)).toEqual([
      [1, "unknown"],
      [2, "unknown"],
      [3, "unknown"],
    ]);
    expect(await account("acct_poison_leased")).toBeNull();
  });

  it("without a lease: its batch-mates commit once the message is redelivered, and it is dead-lettered alone", async () => {
    // proc-handler-fast: a D1-only handler (no lease on the happy path), 2 retries.
    const source = "proc-handler-fast";
    const mates = await Promise.all(
      [0, 1, 3, 4].map((index) =>
        seedReceipt({
          source,
          eventKey: `evt_poison_mate_${index}`,
          payload: { account: "acct_poison_mates", amount: 1 },
        }),
      ),
    );
    const poisonKey = "evt_poison_lease_free";
    const poison = await seedReceipt({
      source,
      eventKey: poisonKey,
      payload: { account: "acct_poison_itself", amount: 100 },
    });
    const receiptIds = [mates[0]!, mates[1]!, poison, mates[2]!, mates[3]!];
    const requeued: { receiptIds: string[]; delaySeconds: number | undefined }[] = [];
    const runEnv = {
      ...testEnv,
      WORK_QUEUE: {
        send: async (body: QueuedWork, options?: QueueSendOptions) =>
          void requeued.push({ receiptIds: receiptIdsOf(body), delaySeconds: options?.delaySeconds }),
        sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>, options?: QueueSendBatchOptions) => {
          for (const message of messages)
            requeued.push({
              receiptIds: receiptIdsOf(message.body),
              delaySeconds: message.delaySeconds ?? options?.delaySeconds,
            });
        },
      } as unknown as Queue,
    } as Env;
    /** One delivery of the relay's message, as the queue makes it: `attempts` is the queue's delivery count. */
    const deliver = (attempts: number) => {
      const batch = createMessageBatch<QueuedWork>("webhook-work", [
        { id: "msg_poison_batch", timestamp: new Date(), attempts, body: { source, receiptIds } },
      ]);
      const ctx = createExecutionContext();
      return { batch, ctx, run: worker.queue(batch, runEnv, ctx) };
    };
    const statuses = async () => Promise.all(receiptIds.map(async (receiptId) => (await receiptRow(receiptId)).status));

    // Delivery 1: the batch runs together and the poison kills the isolate before the shared commit.
    const crash1 = hangNextRun(poisonKey);
    void deliver(1).run;
    await crash1.entered;
    expect(await statuses()).toEqual(["pending", "pending", "pending", "pending", "pending"]);

    // Delivery 2, the queue's redelivery: each receipt runs and commits on its own, under a lease that counts it.
    // The ones before the poison commit; the poison crashes again, its attempt on record as started.
    const crash2 = hangNextRun(poisonKey);
    void deliver(2).run;
    await crash2.entered;
    expect(await statuses()).toEqual(["processed", "processed", "processing", "pending", "pending"]);
    expect((await receiptRow(poison)).attempts).toBe(1);

    // Delivery 3: the rest of the batch commits; the poison's lease still holds, so it goes back on the queue on
    // its own message, and this one is acknowledged.
    // Were the poison run again here, it would crash again.
    const crash3 = hangNextRun(poisonKey);
    let crash3Entered = false;
    void crash3.entered.then(() => (crash3Entered = true));
    const third = deliver(3);
    await third.run;
    expect(await getQueueResult(third.batch, third.ctx)).toMatchObject({
      explicitAcks: ["msg_poison_batch"],
      retryMessages: [],
    });
    expect(await statuses()).toEqual(["processed", "processed", "processing", "processed", "processed"]);
    expect((await account("acct_poison_mates"))?.credits).toBe(4);
    expect(requeued).toEqual([{ receiptIds: [poison], delaySeconds: expect.any(Number) }]);
    expect(crash3Entered).toBe(false);

    // On its own now, each time its lease runs out it is taken over under a new lease, counted, and crashes again,
    // until the count says its 3 attempts are spent.
    let now = Date.now() + LEASE_MS + 1;
    void processReceipt(testEnv, poison, now);
    await crash3.entered;
    expect(await receiptRow(poison)).toMatchObject({ status: "processing", attempts: 2 });
    now += LEASE_MS + 1;
    const crash4 = hangNextRun(poisonKey);
    void processReceipt(testEnv, poison, now);
    await crash4.entered;
    expect(await receiptRow(poison)).toMatchObject({ status: "processing", attempts: 3 });
    now += LEASE_MS + 1;
    expect(await settled(processReceipt(testEnv, poison, now))).toEqual({ kind: "done", status: "dead" });

    expect(await statuses()).toEqual(["processed", "processed", "dead", "processed", "processed"]);
    expect(await receiptRow(poison)).toMatchObject({ attempts: 3, hasBody: 1 });
    expect(await history(poison)).toEqual([
      [1, "unknown"],
      [2, "unknown"],
      [3, "unknown"],
    ]);
    expect(await account("acct_poison_itself")).toBeNull();
    expect((await account("acct_poison_mates"))?.credits).toBe(4);
  });
  it("as a further delivery: a redelivered message of its route runs each delivery on its own, so its batch-mates commit", async () => {
    // The same handler as a second route behind a first that delivered: the message names that route.
    const source = "proc-fanout-poison";
    const runEnv = envWithSources({
      [source]: {
        provider: "standard-webhooks",
        secrets: ["DEMO_WEBHOOK_SECRET"],
        retry: { base_delay_seconds: 1, max_delay_seconds: 1, max_retries: 2 },
        routes: [
          { name: "plain", destination: "none" },
          { name: "credits", destination: "handler:test-scripted" },
        ],
      },
    });
    const poisonKey = "evt_poison_further";
    const seedDelivered = (eventKey: string, payload: Record<string, unknown>) =>
      seedFurtherDelivery({ source, eventKey, payload, ownRoute: "plain", route: "credits" });
    const first = await seedDelivered("evt_poison_further_mate_0", { account: "acct_poison_further", amount: 1 });
    const poison = await seedDelivered(poisonKey, { account: "acct_poison_further_itself", amount: 100 });
    const last = await seedDelivered("evt_poison_further_mate_1", { account: "acct_poison_further", amount: 1 });
    const receiptIds = [first, poison, last];
    const deliver = (attempts: number) => {
      const batch = createMessageBatch<QueuedWork>("webhook-work", [
        { id: "msg_poison_further", timestamp: new Date(), attempts, body: { source, receiptIds, route: "credits" } },
      ]);
      return worker.queue(batch, runEnv, createExecutionContext());
    };
    const statuses = async () =>
      Promise.all(
        receiptIds.map(
          async (receiptId) =>
            (await env.DB.prepare("SELECT status FROM deliveries WHERE receipt_id = ? AND route = 'credits'")
              .bind(receiptId)
              .first<{ status: string }>())!.status,
        ),
      );

    // Delivery 1: the three run together; the poison kills the isolate before their shared commit.
    const crash1 = hangNextRun(poisonKey);
    void deliver(1);
    await crash1.entered;
    expect(await statuses()).toEqual(["pending", "pending", "pending"]);

    // Delivery 2, redelivered: one at a time, each leased (counted) first. The one before the poison commits; the
    // poison crashes again under its own counted lease; the one after it is not charged with that crash.
    const crash2 = hangNextRun(poisonKey);
    void deliver(2);
    await crash2.entered;
    expect(await statuses()).toEqual(["processed", "processing", "pending"]);
    const counts = await env.DB.prepare(
      "SELECT receipt_id AS receiptId, attempts FROM deliveries WHERE route = 'credits' AND receipt_id IN (?, ?)",
    )
      .bind(poison, last)
      .all<{ receiptId: string; attempts: number }>();
    expect(Object.fromEntries(counts.results.map((row) => [row.receiptId, row.attempts]))).toEqual({
      [poison]: 1,
      [last]: 0,
    });
  });
});
