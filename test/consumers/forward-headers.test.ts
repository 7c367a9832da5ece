import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { receiptRow, seedReceipt, standinRequests } from "./support/processing";

/**
 * Event keys and types are the sender's text (a `type_path` can read anything out of a body). A value that is no
 * valid header value must not make the forward throw, which would retry the delivery until it is dead.
 */
describe("forwarded event headers", () => {
  it("sends a type with a newline and an emoji, and a non-ASCII key, percent-encoded; the delivery is processed once", async () => {
    const eventType = "order\npaid 🎉";
    const eventKey = `evt_ü_${crypto.randomUUID()}`;
    const receiptId = await seedReceipt({
      source: "proc-forward-odd-headers",
      eventKey,
      eventType,
      payload: { type: eventType },
    });
    expect(await processReceipt(env, receiptId)).toEqual({ kind: "done", status: "processed" });
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1 });

    const [request, ...more] = await standinRequests(receiptId);
    expect(more).toHaveLength(0);
    expect(request!.headers["x-webhook-event-type"]).toBeUndefined();
    expect(decodeURIComponent(request!.headers["x-webhook-event-type-encoded"]!)).toBe(eventType);
    expect(request!.headers["x-webhook-event-key"]).toBeUndefined();
    expect(decodeURIComponent(request!.headers["x-webhook-event-key-encoded"]!)).toBe(eventKey);
  });

  it("sends plain ASCII values as they are", async () => {
    const eventKey = `evt_plain_${crypto.randomUUID()}`;
    const receiptId = await seedReceipt({
      source: "proc-forward-odd-headers",
      eventKey,
      eventType: "invoice.paid",
      payload: {},
    });
    expect(await processReceipt(env, receiptId)).toEqual({ kind: "done", status: "processed" });
    const [request] = await standinRequests(receiptId);
    expect(request!.headers).toMatchObject({ "x-webhook-event-key": eventKey, "x-webhook-event-type": "invoice.paid" });
    expect(request!.headers["x-webhook-event-type-encoded"]).toBeUndefined();
  });
});
