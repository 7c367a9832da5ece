import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { stripe as stripeAdapter } from "../../src/providers/stripe";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  type SignArgs,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac } from "./support/signers";

// Stripe's own library signs every delivery here; the route verifies it.
const stripeClient = new Stripe("sk_test_not_used_for_network");

const payloadFor = (eventKey: string, objectId = `pi_${eventKey}`) =>
  JSON.stringify({
    id: eventKey,
    object: "event",
    type: "payment_intent.succeeded",
    created: 1_700_000_000,
    data: { object: { id: objectId, object: "payment_intent", amount: 2000 } },
  });

async function signStripe({ secret, eventKey, timestamp }: SignArgs) {
  const payload = payloadFor(eventKey);
  const signature = await stripeClient.webhooks.generateTestHeaderStringAsync({ payload, secret, timestamp });
  return { body: payload, headers: { "stripe-signature": signature, "content-type": "application/json" } };
}

adapterContract({
  name: "stripe",
  sign: signStripe,
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "payment_intent.succeeded",
    subjectId: `pi_${eventKey}`,
    occurredAt: 1_700_000_000_000,
  }),
  signatureHeaders: ["stripe-signature"],
  malformEncoding: (request) =>
    withHeader(request, "stripe-signature", header(request, "stripe-signature").replace(/v1=[0-9a-f]+/, "v1=abc")),
  junkSignature: (request) =>
    withHeader(
      request,
      "stripe-signature",
      `${header(request, "stripe-signature").split(",")[0]},v1=zz,,=,garbage,v0=${"0".repeat(64)},v1=`,
    ),
  timestamped: true,
});

describe("stripe: scheme specifics", () => {
  it("a roll sends several v1 signatures; one from a listed secret is enough, junk entries beside it are skipped", async () => {
    const eventKey = uniqueKey("stripe_roll");
    const timestamp = nowSeconds();
    const payload = payloadFor(eventKey);
    const fromUnlisted = hmac("sha256", secretValue("stripe", "UNLISTED"), `${timestamp}.`, payload).toString("hex");
    const fromCurrent = hmac("sha256", secretValue("stripe", "CURRENT"), `${timestamp}.`, payload).toString("hex");
    const signature = `t=${timestamp},v1=${fromUnlisted},v1=nothex,v0=${"1".repeat(64)},v1=${fromCurrent}`;
    await expectAccepted("pv-stripe", { body: payload, headers: { "stripe-signature": signature } });
  });

  it("two events about one object keep two keys and share the subject", async () => {
    const objectId = `sub_${uniqueKey("shared")}`;
    const receipts: string[] = [];
    for (const eventKey of [uniqueKey("evt_a"), uniqueKey("evt_b")]) {
      const payload = payloadFor(eventKey, objectId);
      const signature = await stripeClient.webhooks.generateTestHeaderStringAsync({
        payload,
        secret: secretValue("stripe", "CURRENT"),
      });
      receipts.push(await expectAccepted("pv-stripe", { body: payload, headers: { "stripe-signature": signature } }));
    }
    const [first, second] = await Promise.all(receipts.map((receiptId) => storedReceipt("pv-stripe", receiptId)));
    expect(first!.subjectId).toBe(objectId);
    expect(second!.subjectId).toBe(objectId);
    expect(first!.eventKey).not.toBe(second!.eventKey);
    expect(first!.keptHeaders["event-key-origin"]).toBeUndefined();
  });

  it("more than 16 entries in the header is refused rather than looped over", async () => {
    const eventKey = uniqueKey("stripe_many");
    const timestamp = nowSeconds();
    const payload = payloadFor(eventKey);
    const valid = hmac("sha256", secretValue("stripe", "CURRENT"), `${timestamp}.`, payload).toString("hex");
    const signature = [
      `t=${timestamp}`,
      ...Array.from({ length: 20 }, () => `v1=${"ab".repeat(32)}`),
      `v1=${valid}`,
    ].join(",");
    await expectRejectedAndNothingWritten("pv-stripe", { body: payload, headers: { "stripe-signature": signature } });
  });

  it("the tolerance is 300 s by default: 290 s old verifies, 310 s old does not (adapter, injected clock)", async () => {
    const secret = secretValue("stripe", "CURRENT");
    const payload = payloadFor("evt_clock");
    const signedAt = 1_700_000_000;
    const signature = await stripeClient.webhooks.generateTestHeaderStringAsync({
      payload,
      secret,
      timestamp: signedAt,
    });
    const verifyAt = (now: number) =>
      stripeAdapter.verify({
        rawBody: new TextEncoder().encode(payload),
        headers: new Headers({ "stripe-signature": signature }),
        url: "https://receiver.test/webhooks/pv-stripe",
        secrets: [{ name: "S", value: secret }],
        now: now * 1000,
        options: {},
      });
    expect((await verifyAt(signedAt + 290)).kind).toBe("event");
    expect(await verifyAt(signedAt + 310)).toEqual({ kind: "rejected", reason: "timestamp-out-of-tolerance" });
  });
});
