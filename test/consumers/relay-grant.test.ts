import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { leaseReceipts } from "../../src/consumers/lease/lease";
import { database } from "../../src/db/client";
import worker from "../../src/index";
import { difference, meterReading } from "../../src/lib/meter";
import type { QueuedWork } from "../../src/model/work-message";
import { receiptRow, seedReceipt, standinRequests } from "./support/processing";

/**
 * The relay's message grants each receipt's first lease (src/consumers/lease/relay-grant.ts): a forward's first
 * attempt, on the relay's message's first delivery, writes no lease row. Every other way to a receipt takes a real
 * lease, and a real lease taken by anyone fences the grant out. Driven through the real queue entry point, with the
 * queue's own delivery count, against the forward stand-in; rows from the runtime's meters.
 */

const SOURCE = "proc-forward-ok";

/** One delivery of a message naming `receiptIds`, as the queue makes it; `relayGrant` as the relay sends it. */
async function deliver(receiptIds: string[], options: { attempts?: number; relayGrant?: boolean } = {}) {
  const body: QueuedWork = {
    source: SOURCE,
    database: "DB",
    receiptIds,
    ...(options.relayGrant === false ? {} : { relayGrant: true as const }),
  };
  const batch = createMessageBatch<QueuedWork>("webhook-work", [
    { id: `msg_grant_${receiptIds[0]}`, timestamp: new Date(), attempts: options.attempts ?? 1, body },
  ]);
  const ctx = createExecutionContext();
  const before = meterReading().totals;
  await worker.queue(batch, env, ctx);
  const result = await getQueueResult(batch, ctx);
  const spent = difference(meterReading().totals, before);
  return { result, d1RowsWritten: spent.d1RowsWritten - spent.d1HandlerRowsWritten };
}

describe("the relay's grant of a forward's first lease", { timeout: 240_000 }, () => {
  it("runs the first attempt on the relay's message without a lease row: one forward, one row written (the commit)", async () => {
    const receiptId = await seedReceipt({ source: SOURCE, payload: { n: 1 } });
    const { result, d1RowsWritten } = await deliver([receiptId]);
    expect(result.explicitAcks).toEqual([`msg_grant_${receiptId}`]);
    expect(d1RowsWritten).toBe(1);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1, leaseUntil: null });
    expect(await standinRequests(receiptId)).toHaveLength(1);
  });

  it("takes a real lease, counted before the forward, for the relay's message redelivered and for any other message", async () => {
    for (const options of [{ attempts: 2 }, { relayGrant: false }]) {
      const receiptId = await seedReceipt({ source: SOURCE, payload: { n: 2 } });
      const { d1RowsWritten } = await deliver([receiptId], options);
      // The lease (status, generation, count) and the commit.
      expect(d1RowsWritten).toBe(2);
      expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1 });
      expect(await standinRequests(receiptId)).toHaveLength(1);
    }
  });

  it("does not run a receipt another consumer has leased while the relay's message waited: it waits for that lease", async () => {
    const receiptId = await seedReceipt({ source: SOURCE, payload: { n: 3 } });
    // The cron's re-drive got there first (the message waited in a backed-up queue): a live lease, generation 1.
    const taken = await leaseReceipts(database(env), [receiptId], Date.now());
    expect(taken.get(receiptId)).toBe(1);
    const { result } = await deliver([receiptId]);
    expect(result.explicitAcks).toEqual([`msg_grant_${receiptId}`]);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processing", attempts: 1 });
    expect(await standinRequests(receiptId)).toHaveLength(0);
  });
});
