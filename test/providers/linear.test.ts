import { LinearWebhookClient } from "@linear/sdk/webhooks";
import { describe, expect, it } from "vitest";
import { linear } from "../../src/providers/linear";
import { adapterContract, expectAccepted, nowSeconds, secretValue, uniqueKey, withHeader } from "./support/contract";
import { hmac } from "./support/signers";

// Linear's SDK only verifies; node:crypto signs with the documented recipe: hex HMAC-SHA256 of the body, whose
// webhookTimestamp (ms) is the signed time.
const linearBody = (eventKey: string, timestampMs: number) =>
  JSON.stringify({
    action: "create",
    type: "Issue",
    createdAt: "2026-11-30T08:00:00.000Z",
    data: { id: `issue-${eventKey}`, title: "Broken build" },
    webhookTimestamp: timestampMs,
  });

adapterContract({
  name: "linear",
  sign({ secret, eventKey, timestamp }) {
    const body = linearBody(eventKey, timestamp * 1000 + 123);
    return {
      body,
      headers: {
        "linear-signature": hmac("sha256", secret, body).toString("hex"),
        "linear-delivery": eventKey,
        "linear-event": "Issue",
      },
    };
  },
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "Issue.create",
    subjectId: `issue-${eventKey}`,
    occurredAt: Date.parse("2026-11-30T08:00:00.000Z"),
  }),
  signatureHeaders: ["linear-signature"],
  malformEncoding: (request) => withHeader(request, "linear-signature", "xyz"),
  junkSignature: (request) => withHeader(request, "linear-signature", "sha256=,,,"),
  timestamped: true,
});

describe("linear: compatibility", () => {
  it("Linear's own SDK (LinearWebhookClient.verify) accepts the delivery the route accepts", async () => {
    const eventKey = uniqueKey("linear_sdk");
    const secret = secretValue("linear", "CURRENT");
    const body = linearBody(eventKey, nowSeconds() * 1000);
    const signature = hmac("sha256", secret, body).toString("hex");
    expect(new LinearWebhookClient(secret).verify(Buffer.from(body), signature)).toBe(true);
    expect(() => new LinearWebhookClient(secretValue("linear", "TEST")).verify(Buffer.from(body), signature)).toThrow();
    await expectAccepted("pv-linear", {
      body,
      headers: { "linear-signature": signature, "linear-delivery": eventKey },
    });
  });
});

describe("linear: webhookTimestamp tolerance (adapter, injected clock)", () => {
  it("one minute by default: 50 s old verifies, 70 s old does not", async () => {
    const secret = "lin_wh_clock";
    const signedAtMs = 1_764_489_600_000;
    const body = linearBody("clock", signedAtMs);
    const verifyAt = (nowMs: number) =>
      linear.verify({
        rawBody: new TextEncoder().encode(body),
        headers: new Headers({
          "linear-signature": hmac("sha256", secret, body).toString("hex"),
          "linear-delivery": "d1",
        }),
        url: "https://receiver.test/webhooks/l",
        secrets: [{ name: "S", value: secret }],
        now: nowMs,
        options: {},
      });
    expect((await verifyAt(signedAtMs + 50_000)).kind).toBe("event");
    expect(await verifyAt(signedAtMs + 70_000)).toEqual({ kind: "rejected", reason: "timestamp-out-of-tolerance" });
  });
});
