import { env, exports } from "cloudflare:workers";
import { hmacValidator as AdyenHmacValidator } from "@adyen/api-library";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import type { ClaimRequest } from "../../src/model/claims";
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
import { ecdsaDerSign } from "./support/signers";

/**
 * Deliveries that batch events. SendGrid signs the whole batch, so it is one event deduped by its bytes: a retried
 * batch is one receipt, found by any item's own id through the admin API's `itemId` filter. Adyen signs each item
 * and nothing around them, so each item is its own event under its own key: no batch, subset, mix or reordering of
 * captured items is ever accepted again.
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

type AdyenItem = ReturnType<typeof adyenItem>;

const adyenBatch = (...items: AdyenItem[]) => ({
  live: "false",
  notificationItems: items.map((item) => ({ NotificationRequestItem: item })),
});

const adyenRequest = (body: string): SignedRequest => ({ body, headers: { "content-type": "application/json" } });

/** Each item's answer, in the batch's order: the receipts and dispositions ride comma-separated in the headers. */
async function itemAnswers(response: Response): Promise<{ status: string; receipt: string }[]> {
  expect({ status: response.status, text: await response.text() }).toEqual({ status: 200, text: "[accepted]" });
  const receipts = response.headers.get("x-webhook-receipt")!.split(", ");
  const statuses = response.headers.get("x-webhook-disposition")!.split(", ");
  return receipts.map((receipt, index) => ({ status: statuses[index]!, receipt }));
}

/** The bytes the receipt keeps (storedReceipt relays the shards into D1 first). */
async function storedBody(receiptId: string): Promise<string> {
  await storedReceipt("pv-adyen", receiptId);
  const row = await env.DB.prepare("SELECT body FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ body: number[] }>();
  return new TextDecoder().decode(new Uint8Array(row!.body));
}

const adyenItemKey = (item: AdyenItem) => `${item.pspReference}:${item.eventCode}:${item.success}`;

/** The real shards, except that a claim of `eventKey` fails as an overloaded Durable Object does. */
function shardsFailingFor(eventKey: string): typeof env.CLAIM_SHARDS {
  const real = env.CLAIM_SHARDS;
  return new Proxy(real, {
    get: (target, property) => {
      if (property !== "get") return Reflect.get(target, property).bind(target);
      return (...args: Parameters<typeof real.get>) => {
        const stub = real.get(...args);
        return new Proxy(stub, {
          get: (stubTarget, name) =>
            name === "claim"
              ? (request: ClaimRequest) =>
                  request.eventKey === eventKey
                    ? Promise.reject(new Error("Durable Object is overloaded. Requests queued for too long."))
                    : stubTarget.claim(request)
              : Reflect.get(stubTarget, name),
        });
      };
    },
  });
}

describe("adyen: notificationItems, one event per item", () => {
  it("a retried batch of several items is one receipt per item, each keyed by its own item and found by its pspReference", async () => {
    const [a, b] = [adyenItem(uniqueKey("psp_a")), adyenItem(uniqueKey("psp_b"), "CAPTURE")];
    const request = adyenRequest(JSON.stringify(adyenBatch(a, b)));
    const before = await storedCounts("pv-adyen");
    const first = await itemAnswers(await send("pv-adyen", request));
    expect(first.map((answer) => answer.status)).toEqual(["accepted", "accepted"]);
    const again = await itemAnswers(await send("pv-adyen", request));
    expect(again).toEqual(first.map(({ receipt }) => ({ status: "duplicate", receipt })));
    expect(await storedCounts("pv-adyen")).toEqual({ claims: before.claims + 2, receipts: before.receipts + 2 });

    for (const [index, item] of [a, b].entries()) {
      const receiptId = first[index]!.receipt;
      expect(await storedReceipt("pv-adyen", receiptId)).toMatchObject({
        eventKey: adyenItemKey(item),
        eventType: item.eventCode,
        subjectId: item.pspReference,
        keptHeaders: { "batch-items": "2", "batch-item-ids": item.pspReference },
      });
      // Each receipt keeps the delivery with only its own item: byte for byte what Adyen sends for it alone.
      expect(await storedBody(receiptId)).toBe(JSON.stringify(adyenBatch(item)));
      expect(await findByItem("pv-adyen", item.pspReference)).toEqual([receiptId]);
    }
  });

  it("no subset, mix or reordering of captured items is accepted again; a new item beside a seen one is accepted alone", async () => {
    const [a, b, c, d] = [
      adyenItem(uniqueKey("psp_replay_a")),
      adyenItem(uniqueKey("psp_replay_b"), "CAPTURE"),
      adyenItem(uniqueKey("psp_replay_c")),
      adyenItem(uniqueKey("psp_replay_d"), "REFUND"),
    ];
    const captured = await itemAnswers(await send("pv-adyen", adyenRequest(JSON.stringify(adyenBatch(a, b)))));
    const alone = await itemAnswers(await send("pv-adyen", adyenRequest(JSON.stringify(adyenBatch(c)))));
    expect(new Set([...captured, ...alone].map((answer) => answer.status))).toEqual(new Set(["accepted"]));
    const receiptOf = new Map([a, b, c].map((item, index) => [item, [...captured, ...alone][index]?.receipt]));

    // Adyen signs each item and nothing around them: every spelling of seen items is those items again, never new.
    const before = await storedCounts("pv-adyen");
    for (const items of [[a], [b], [a, c], [b, c], [a, b, c], [b, a], [c, b, a]]) {
      const answers = await itemAnswers(await send("pv-adyen", adyenRequest(JSON.stringify(adyenBatch(...items)))));
      expect(answers.map((answer) => answer.status)).not.toContain("accepted");
      expect(answers).toEqual(items.map((item) => ({ status: "duplicate", receipt: receiptOf.get(item) })));
    }
    // Re-indented, the same items carry other bytes: quarantined beside their receipts (for a human), never new.
    expect(await itemAnswers(await send("pv-adyen", adyenRequest(JSON.stringify(adyenBatch(b, c), null, 2))))).toEqual(
      [b, c].map((item) => ({ status: "quarantined", receipt: receiptOf.get(item) })),
    );
    expect(await storedCounts("pv-adyen")).toEqual(before);

    // One genuine item, doubled (and re-indented), is refused and writes nothing: Adyen never sends one twice.
    for (const doubled of [
      JSON.stringify(adyenBatch(c, c)),
      JSON.stringify(adyenBatch(c, c), null, 2),
      JSON.stringify(adyenBatch(a, b, a)),
    ]) {
      await expectRejectedAndNothingWritten("pv-adyen", adyenRequest(doubled));
    }

    // A new item beside a seen one is its own accepted event; the seen one stays a duplicate.
    const mixed = await itemAnswers(await send("pv-adyen", adyenRequest(JSON.stringify(adyenBatch(a, d)))));
    expect(mixed[0]).toEqual({ status: "duplicate", receipt: receiptOf.get(a) });
    expect(mixed[1]!.status).toBe("accepted");
    expect(await storedCounts("pv-adyen")).toEqual({ claims: before.claims + 1, receipts: before.receipts + 1 });
    expect(await storedReceipt("pv-adyen", mixed[1]!.receipt)).toMatchObject({ eventKey: adyenItemKey(d) });
    expect(await findByItem("pv-adyen", d.pspReference)).toEqual([mixed[1]!.receipt]);
    expect(await findByItem("pv-adyen", a.pspReference)).toEqual([receiptOf.get(a)]);
  });

  it("a batch one of whose claims fails answers 503, and Adyen's retry claims the rest as duplicates", async () => {
    const [a, b] = [adyenItem(uniqueKey("psp_fail_a")), adyenItem(uniqueKey("psp_fail_b"), "CAPTURE")];
    const body = JSON.stringify(adyenBatch(a, b));
    const before = await storedCounts("pv-adyen");
    const response = await app.fetch(new Request("https://receiver.test/webhooks/pv-adyen", { method: "POST", body }), {
      ...env,
      CLAIM_SHARDS: shardsFailingFor(adyenItemKey(b)),
    });
    expect({ status: response.status, retryAfter: response.headers.get("retry-after") }).toEqual({
      status: 503,
      retryAfter: "5",
    });
    // a's claim was durable before the answer; b's never was. The retry finds a claimed and claims b.
    const retried = await itemAnswers(await send("pv-adyen", adyenRequest(body)));
    expect(retried.map((answer) => answer.status)).toEqual(["duplicate", "accepted"]);
    expect(await storedCounts("pv-adyen")).toEqual({ claims: before.claims + 2, receipts: before.receipts + 2 });
  });

  it("each item keeps its own bytes as received, whatever the batch's spelling around them", async () => {
    const [a, b] = [adyenItem(uniqueKey("psp_bytes_a")), adyenItem(uniqueKey("psp_bytes_b"), "CAPTURE")];
    // Unsigned fields holding brackets, quotes and escapes; a non-ASCII reason; an escaped member name; an earlier
    // notificationItems member JSON.parse overrides; a byte-order mark and odd whitespace.
    const elementA = `{ "NotificationRequestItem" : ${JSON.stringify({ ...a, reason: 'x]}"[{\\' })} }`;
    const elementB = `{"Notification\\u0052equestItem":${JSON.stringify({ ...b, reason: "café ✓" })}}`;
    const head = '\ufeff \n{"notificationItems": [1, "]"], "live":"false",\t"notification\\u0049tems" :\r\n [';
    const body = `${head}${elementA} ,\n ${elementB}  ] }\n`;
    const answers = await itemAnswers(await send("pv-adyen", adyenRequest(body)));
    expect(answers.map((answer) => answer.status)).toEqual(["accepted", "accepted"]);
    for (const [index, element] of [elementA, elementB].entries())
      expect(await storedBody(answers[index]!.receipt)).toBe(`${head.slice(1, -1)}[${element}] }\n`);
  });

  it("a single item is keyed by Adyen's own rule, keeps its body as received, and is found by its pspReference", async () => {
    const item = adyenItem(uniqueKey("psp_single"));
    const request = adyenRequest(JSON.stringify(adyenBatch(item), null, 1));
    const receiptId = await expectOneReceiptForRetriedBatch("pv-adyen", request, request);
    expect(await storedReceipt("pv-adyen", receiptId)).toMatchObject({
      eventKey: adyenItemKey(item),
      keptHeaders: { "batch-items": "1", "batch-item-ids": item.pspReference },
    });
    expect(await storedBody(receiptId)).toBe(request.body);
    expect(await findByItem("pv-adyen", item.pspReference)).toEqual([receiptId]);
  });
});
