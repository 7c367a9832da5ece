import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { utf8Bytes } from "../../src/crypto/encoding";
import worker from "../../src/index";
import { ulid } from "../../src/lib/ulid";
import type { WorkMessage } from "../../src/model/work-message";
import { RESTART_REQUEUE_CRON, remainingDelaySeconds } from "../../src/reconcile/restart-requeue";
import { waitForStatus } from "../support/deliveries";
import { unique } from "./support";

/**
 * `npm start`'s ask after a start or reload of wrangler dev, whose in-memory queue lost every message: each unfinished
 * receipt goes back on the real queue with what is left of its delay, once per boot, and only where .dev.vars says
 * LOCAL_DEVELOPMENT. The queue binding is the real one, observed on its way through.
 */

const SOURCE = "reconcile-stuck";

/** A receipt the relay wrote and whose queue message is gone (the dev server restarted). */
async function receiptWithoutMessage(
  eventKey: string,
  fields: { status: string; nextAttemptAt?: number; leaseUntil?: number; attempts?: number },
) {
  const receiptId = ulid();
  const now = Date.now();
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, lease_until, attempts)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(
      receiptId,
      SOURCE,
      eventKey,
      "0".repeat(64),
      utf8Bytes("{}"),
      now,
      now,
      fields.status,
      fields.nextAttemptAt ?? null,
      fields.leaseUntil ?? null,
      fields.attempts ?? 0,
    )
    .run();
  return receiptId;
}

/** The real queue, with every message sent through it noted (receipt ids and delay). */
function observedQueue() {
  const sent: { receiptIds: string[]; delaySeconds: number }[] = [];
  const queue = {
    send: (body: WorkMessage, options?: QueueSendOptions) => {
      sent.push({ receiptIds: body.receiptIds, delaySeconds: options?.delaySeconds ?? 0 });
      return env.WORK_QUEUE.send(body, options);
    },
    sendBatch: (messages: Iterable<MessageSendRequest<WorkMessage>>, options?: QueueSendBatchOptions) => {
      const list = [...messages];
      for (const message of list)
        sent.push({
          receiptIds: message.body.receiptIds,
          delaySeconds: message.delaySeconds ?? options?.delaySeconds ?? 0,
        });
      return env.WORK_QUEUE.sendBatch(list, options);
    },
  };
  return { sent, queue };
}

function askToRequeue(vars: Record<string, string | undefined>, queue: object) {
  return worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: RESTART_REQUEUE_CRON }), {
    ...env,
    ...vars,
    WORK_QUEUE: queue,
  } as unknown as Env);
}

const delayOf = (sent: { receiptIds: string[]; delaySeconds: number }[], receiptId: string) =>
  sent.filter((message) => message.receiptIds.includes(receiptId)).map((message) => message.delaySeconds);

describe("refilling the local queue after a restart", () => {
  it("is refused without LOCAL_DEVELOPMENT, and sends nothing", async () => {
    const lost = await receiptWithoutMessage(`msg_restart_refused_${unique()}`, { status: "pending" });
    for (const vars of [{ LOCAL_DEVELOPMENT: undefined }, { LOCAL_DEVELOPMENT: "yes" }]) {
      const { sent, queue } = observedQueue();
      await expect(askToRequeue(vars, queue)).rejects.toThrow(/LOCAL_DEVELOPMENT/);
      expect(sent).toEqual([]);
    }
    const row = await env.DB.prepare("SELECT status, attempts FROM receipts WHERE id = ?").bind(lost).first();
    expect(row).toEqual({ status: "pending", attempts: 0 });
  });

  it("sends every unfinished receipt again with what is left of its delay, once per boot, and it is applied", async () => {
    const neverAttempted = `msg_restart_lost_${unique()}`;
    const neverAttemptedId = await receiptWithoutMessage(neverAttempted, { status: "pending" });
    const retryId = await receiptWithoutMessage(`msg_restart_retry_${unique()}`, {
      status: "pending",
      nextAttemptAt: Date.now() + 90_000,
      attempts: 1,
    });
    const overdueId = await receiptWithoutMessage(`msg_restart_overdue_${unique()}`, {
      status: "pending",
      nextAttemptAt: Date.now() - 60_000,
      attempts: 1,
    });
    const leasedId = await receiptWithoutMessage(`msg_restart_leased_${unique()}`, {
      status: "processing",
      leaseUntil: Date.now() + 40_000,
      attempts: 1,
    });
    const doneId = await receiptWithoutMessage(`msg_restart_done_${unique()}`, { status: "processed", attempts: 1 });

    const { sent, queue } = observedQueue();
    await askToRequeue({ LOCAL_DEVELOPMENT: "true" }, queue);
    expect(delayOf(sent, neverAttemptedId)).toEqual([0]);
    expect(delayOf(sent, overdueId)).toEqual([0]);
    const [retryDelay] = delayOf(sent, retryId);
    expect(retryDelay).toBeGreaterThan(80);
    expect(retryDelay).toBeLessThanOrEqual(90);
    const [leaseDelay] = delayOf(sent, leasedId);
    expect(leaseDelay).toBeGreaterThan(30);
    expect(leaseDelay).toBeLessThanOrEqual(40);
    expect(delayOf(sent, doneId)).toEqual([]);
    // Each unfinished receipt once.
    expect(
      sent
        .flatMap((message) => message.receiptIds)
        .filter((id) => [neverAttemptedId, retryId, overdueId, leasedId].includes(id)).length,
    ).toBe(4);

    expect(await waitForStatus(SOURCE, neverAttempted, ["skipped"])).toBe("skipped");

    // The same boot asks again (dev.mjs asks every few seconds): its queue is whole, so nothing is sent twice.
    const again = observedQueue();
    await askToRequeue({ LOCAL_DEVELOPMENT: "true" }, again.queue);
    expect(again.sent).toEqual([]);
  });

  it("waits for a retry's due time or a live lease's end, and sends the rest now", () => {
    const now = 1_000_000;
    expect(remainingDelaySeconds({ status: "pending", nextAttemptAt: null, leaseUntil: null }, now)).toBe(0);
    expect(remainingDelaySeconds({ status: "pending", nextAttemptAt: now - 1, leaseUntil: null }, now)).toBe(0);
    expect(remainingDelaySeconds({ status: "pending", nextAttemptAt: now + 1_500, leaseUntil: null }, now)).toBe(2);
    expect(remainingDelaySeconds({ status: "processing", nextAttemptAt: null, leaseUntil: now + 30_000 }, now)).toBe(
      30,
    );
    expect(remainingDelaySeconds({ status: "processing", nextAttemptAt: now + 60_000, leaseUntil: now - 1 }, now)).toBe(
      0,
    );
  });
});
