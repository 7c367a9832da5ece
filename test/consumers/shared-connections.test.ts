import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ATTEMPTS_IN_FLIGHT } from "../../src/consumers/attempt/slice-budget";
import worker from "../../src/index";
import type { QueuedWork } from "../../src/model/work-message";
import { deliveryRow, keysOf, lane } from "../routing/gate-support";
import { seedFurtherDelivery, seedReceipt } from "./support/processing";

/**
 * One consumer invocation runs a batch's receipts and its further-delivery messages alongside each other
 * (src/consumers/queue/queue.ts), and a Worker keeps at most ATTEMPTS_IN_FLIGHT outgoing connections open: the two
 * share that budget (src/consumers/attempt/attempt-slots.ts, ConnectionSlots), never six each. Both kinds go to one
 * slow lane of the forward stand-in, which records how many of the lane's requests were open as each arrived.
 */

const EACH = 6;

describe("a batch of receipts and further deliveries in one invocation", () => {
  it("never holds more than ATTEMPTS_IN_FLIGHT connections open in all, and delivers each once", {
    timeout: 120_000,
  }, async () => {
    const receipts: string[] = [];
    const further: string[] = [];
    for (let index = 0; index < EACH; index += 1) {
      const payload = { type: "account.credited", data: { amount: index } };
      receipts.push(await seedReceipt({ source: "connections-one", payload }));
      further.push(
        await seedFurtherDelivery({ source: "connections-two", payload, ownRoute: "plain", route: "further" }),
      );
    }
    const messages: Array<{ id: string; body: QueuedWork }> = [
      {
        id: `msg_connections_receipts_${receipts[0]}`,
        body: { source: "connections-one", database: "DB", receiptIds: receipts, relayGrant: true },
      },
      {
        id: `msg_connections_further_${further[0]}`,
        body: { source: "connections-two", database: "DB", receiptIds: further, route: "further" },
      },
    ];
    const batch = createMessageBatch<QueuedWork>(
      "webhook-work",
      messages.map((message) => ({ ...message, timestamp: new Date(), attempts: 1 })),
    );
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(messages.map((message) => message.id).sort());

    const mine = new Set([...receipts, ...further.map((receiptId) => `${receiptId}:further`)]);
    const requests = (await lane("shared-connections")).filter((request) =>
      mine.has(request.headers["idempotency-key"]!),
    );
    expect(keysOf(requests).sort()).toEqual([...mine].sort());
    // Six each would have let twelve be open at once: the slow lane keeps every one open 1.5 s.
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBeLessThanOrEqual(ATTEMPTS_IN_FLIGHT);
    for (const receiptId of further)
      expect(await deliveryRow(receiptId, "further"), receiptId).toMatchObject({ status: "processed", attempts: 1 });
  });
});
