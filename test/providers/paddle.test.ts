import { Paddle } from "@paddle/paddle-node-sdk";
import { describe, expect, it } from "vitest";
import { adapterContract, expectAccepted, nowSeconds, secretValue, uniqueKey, withHeader } from "./support/contract";
import { hmac } from "./support/signers";

// Paddle's SDK only verifies; node:crypto signs with the documented recipe `${ts}:${body}`.
const paddleBody = (eventKey: string) =>
  JSON.stringify({
    event_id: eventKey,
    event_type: "subscription.updated",
    occurred_at: "2026-11-30T08:00:00.000000Z",
    notification_id: `ntf_${eventKey}`,
    data: { id: `sub_${eventKey}`, status: "active" },
  });

const h1 = (secret: string, timestamp: number, body: string) =>
  hmac("sha256", secret, `${timestamp}:`, body).toString("hex");

adapterContract({
  name: "paddle",
  sign({ secret, eventKey, timestamp }) {
    const body = paddleBody(eventKey);
    return {
      body,
      headers: {
        "paddle-signature": `ts=${timestamp};h1=${h1(secret, timestamp, body)}`,
        "content-type": "application/json",
      },
    };
  },
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "subscription.updated",
    subjectId: `sub_${eventKey}`,
    occurredAt: Date.parse("2026-11-30T08:00:00.000Z"),
  }),
  signatureHeaders: ["paddle-signature"],
  malformEncoding: (request) => withHeader(request, "paddle-signature", `ts=${nowSeconds()};h1=abc`),
  junkSignature: (request) => withHeader(request, "paddle-signature", `ts=${nowSeconds()};h1=;h2=zz;;=;junk`),
  timestamped: true,
});

describe("paddle: compatibility and rotation", () => {
  it("Paddle's own SDK (webhooks.isSignatureValid) accepts the delivery the route accepts", async () => {
    // The SDK picks its crypto when a client is constructed; the API key is never used (no network).
    const paddleSdk = new Paddle("pdl_sdbx_apikey_unused_in_tests").webhooks;
    const eventKey = uniqueKey("paddle_sdk");
    const timestamp = nowSeconds();
    const body = paddleBody(eventKey);
    const secret = secretValue("paddle", "CURRENT");
    const header = `ts=${timestamp};h1=${h1(secret, timestamp, body)}`;
    expect(await paddleSdk.isSignatureValid(body, secret, header)).toBe(true);
    expect(await paddleSdk.isSignatureValid(body, secretValue("paddle", "TEST"), header)).toBe(false);
    await expectAccepted("pv-paddle", { body, headers: { "paddle-signature": header } });
  });

  it("during a rotation Paddle sends one h1 per secret; one from a listed secret is enough", async () => {
    const eventKey = uniqueKey("paddle_roll");
    const timestamp = nowSeconds();
    const body = paddleBody(eventKey);
    const header = `ts=${timestamp};h1=${h1(secretValue("paddle", "UNLISTED"), timestamp, body)};h1=${h1(secretValue("paddle", "PREVIOUS"), timestamp, body)}`;
    await expectAccepted("pv-paddle", { body, headers: { "paddle-signature": header } });
  });
});
