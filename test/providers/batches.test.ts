import { env, exports } from "cloudflare:workers";
import { hmacValidator as AdyenHmacValidator } from "@adyen/api-library";
import { describe, expect, it } from "vitest";
import {
  claimAnswer,
  expectRejectedAndNothingWritten,
  nowSeconds,
  type SignedRequest,
  secretValue,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
} from "./support/contract";
import { ecdsaDerSign, sha256Hex } from "./support/signers";

/**
 * Deliveries that batch events: each is deduped as a whole (SendGrid by its bytes; Adyen by its items' signed keys,
 * so a re-indented or reordered copy is the same event), so a retried batch is one receipt; and the audit finds the delivery by any item's own id through
 * the admin API's `itemId` filter.
 */

async function findByItem(source: string, itemId: string): Promise<string[]> {
  const url = `https://receiver.test/admin/api/receipts?source=${source}&itemId=${encodeURIComponent(itemId)}`;
  const response = await exports.default.fetch(
    new Request(url, { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } }),
  );
  expect(response.status).toBe(200);
  return ((await response.json()) as { receipts: { receiptId: string }[] }).receipts.map(
    (receipt) => receipt.receiptId,
  );
}

async function expectOneReceiptForRetriedBatch(
  source: string,
  first: SignedRequest,
  retry: SignedRequest,
): Promise<string> {
  const before = await storedCounts(source);
  const accepted = await claimAnswer(await send(source, first));
  expect(accepted.status).toBe("accepted");
  expect(await claimAnswer(await send(source, retry))).toEqual({ status: "duplicate", receipt: accepted.receipt });
  expect(await storedCounts(source)).toEqual({ claims: before.claims + 1, receipts: before.receipts + 1 });
  return accepted.receipt;
}

function sendgridBatch(ids: string[], timestamp: number): SignedRequest {
  const body = JSON.stringify(
    ids.map((id, index) => ({
      email: `${index}@example.com`,
      event: "delivered",
      sg_event_id: id,
      timestamp: 1_700_000_000 + index,
    })),
  );
  return {
    body,
    headers: {
      "x-twilio-email-event-webhook-signature": ecdsaDerSign("PV_SENDGRID_CURRENT", String(timestamp), body).toString(
        "base64",
      ),
      "x-twilio-email-event-webhook-timestamp": String(timestamp),
      "content-type": "application/json",
    },
  };
}

describe("sendgrid: a batch of events, deduped by its bytes", () => {
  it("a retried batch (same bytes, re-signed) is one receipt, found by any event's sg_event_id", async () => {
    const ids = [uniqueKey("sg_a"), uniqueKey("sg_b"), uniqueKey("sg_c")];
    const first = sendgridBatch(ids, nowSeconds());
    const receiptId = await expectOneReceiptForRetriedBatch("pv-sendgrid", first, sendgridBatch(ids, nowSeconds() + 1));
    expect((await storedReceipt("pv-sendgrid", receiptId)).keptHeaders).toMatchObject({
      "batch-items": "3",
      "batch-item-ids": ids.join(" "),
    });
    for (const id of ids) expect(await findByItem("pv-sendgrid", id)).toEqual([receiptId]);
    // A whole token only: a prefix of an id, or an id from no batch, finds nothing.
    expect(await findByItem("pv-sendgrid", ids[1]!.slice(0, -1))).toEqual([]);
    expect(await findByItem("pv-sendgrid", uniqueKey("sg_none"))).toEqual([]);
  });
});

function adyenItem(pspReference: string, eventCode = "AUTHORISATION") {
  const item = {
    pspReference,
    originalReference: "",
    merchantAccountCode: "YOUR_MERCHANT_ACCOUNT",
    merchantReference: "order-9",
    amount: { value: 2500, currency: "EUR" },
    eventCode,
    success: "true",
    eventDate: "2026-11-30T08:00:00+01:00",
    additionalData: {} as Record<string, string>,
  };
  item.additionalData.hmacSignature = new AdyenHmacValidator().calculateHmac(
    item as never,
    secretValue("adyen", "CURRENT"),
  );
  return item;
}

describe("adyen: notificationItems", () => {
  it("a retried batch of several items is one receipt keyed by its items' keys, found by any item's pspReference", async () => {
    const references = [uniqueKey("psp_a"), uniqueKey("psp_b")];
    const body = JSON.stringify({
      live: "false",
      notificationItems: references.map((reference, index) => ({
        NotificationRequestItem: adyenItem(reference, index ? "CAPTURE" : "AUTHORISATION"),
      })),
    });
    const request = { body, headers: { "content-type": "application/json" } };
    const receiptId = await expectOneReceiptForRetriedBatch("pv-adyen", request, request);
    const itemKeys = [`${references[0]}:AUTHORISATION:true`, `${references[1]}:CAPTURE:true`].sort();
    expect((await storedReceipt("pv-adyen", receiptId)).eventKey).toBe(`batch:${sha256Hex(JSON.stringify(itemKeys))}`);
    for (const reference of references) expect(await findByItem("pv-adyen", reference)).toEqual([receiptId]);
  });

  it("a captured batch re-indented or reordered is a duplicate, an item doubled is refused, and a different batch is new", async () => {
    const [a, b, c] = [
      adyenItem(uniqueKey("psp_replay_a")),
      adyenItem(uniqueKey("psp_replay_b"), "CAPTURE"),
      adyenItem(uniqueKey("psp_replay_c")),
    ];
    const batch = (...items: unknown[]) => ({
      live: "false",
      notificationItems: items.map((item) => ({ NotificationRequestItem: item })),
    });
    const captured = { body: JSON.stringify(batch(a, b)), headers: { "content-type": "application/json" } };
    const receiptId = await expectOneReceiptForRetriedBatch("pv-adyen", captured, captured);
    // Adyen signs each item, never the batch around them: a re-indented or reordered copy changes no signed byte, so
    // it is the same event under its key, and its other bytes make it a quarantined copy (for a human), never new.
    const before = await storedCounts("pv-adyen");
    for (const copy of [JSON.stringify(batch(b, a), null, 2), JSON.stringify(batch(a, b), null, 4)]) {
      expect(await claimAnswer(await send("pv-adyen", { ...captured, body: copy }))).toEqual({
        status: "quarantined",
        receipt: receiptId,
      });
    }
    expect(await storedCounts("pv-adyen")).toEqual(before);

    // One genuine item, doubled (and re-indented), is not a new event: it is refused and writes nothing.
    const alone = { body: JSON.stringify(batch(c)), headers: { "content-type": "application/json" } };
    const single = await claimAnswer(await send("pv-adyen", alone));
    expect(single.status).toBe("accepted");
    for (const doubled of [
      JSON.stringify(batch(c, c)),
      JSON.stringify(batch(c, c), null, 2),
      JSON.stringify(batch(a, b, a)),
    ]) {
      await expectRejectedAndNothingWritten("pv-adyen", { ...alone, body: doubled });
    }
    expect(await claimAnswer(await send("pv-adyen", { ...alone, body: JSON.stringify(batch(c), null, 2) }))).toEqual({
      status: "quarantined",
      receipt: single.receipt,
    });

    // A genuinely different batch (another item beside a known one) is a new event.
    expect((await claimAnswer(await send("pv-adyen", { ...captured, body: JSON.stringify(batch(a, c)) }))).status).toBe(
      "accepted",
    );
  });

  it("a single item is keyed by Adyen's own rule and found by its pspReference too", async () => {
    const reference = uniqueKey("psp_single");
    const body = JSON.stringify({
      live: "false",
      notificationItems: [{ NotificationRequestItem: adyenItem(reference) }],
    });
    const request = { body, headers: { "content-type": "application/json" } };
    const receiptId = await expectOneReceiptForRetriedBatch("pv-adyen", request, request);
    expect((await storedReceipt("pv-adyen", receiptId)).eventKey).toBe(`${reference}:AUTHORISATION:true`);
    expect(await findByItem("pv-adyen", reference)).toEqual([receiptId]);
  });
});
