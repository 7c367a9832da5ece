import { WebhooksHelper } from "square";
import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  secretValue,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac } from "./support/signers";

// Square's SDK only verifies; node:crypto signs with the documented recipe: base64 HMAC-SHA256 of URL ‖ body.
// Both pv-square and pv-square-test set notification_url to this (a proxy in front of the Worker, say).
const NOTIFICATION_URL = "https://hooks.example.com/webhooks/pv-square";

const squareBody = (eventKey: string) =>
  JSON.stringify({
    merchant_id: "ML1",
    type: "payment.updated",
    event_id: eventKey,
    created_at: "2026-11-30T08:00:00Z",
    data: { type: "payment", id: `pay_${eventKey}`, object: { payment: { version: 3 } } },
  });

adapterContract({
  name: "square",
  sign({ secret, eventKey }) {
    const body = squareBody(eventKey);
    return {
      body,
      headers: { "x-square-hmacsha256-signature": hmac("sha256", secret, NOTIFICATION_URL, body).toString("base64") },
    };
  },
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "payment.updated",
    subjectId: `pay_${eventKey}`,
    occurredAt: Date.parse("2026-11-30T08:00:00Z"),
  }),
  signatureHeaders: ["x-square-hmacsha256-signature"],
  malformEncoding: (request) => withHeader(request, "x-square-hmacsha256-signature", "a"),
  junkSignature: (request) => withHeader(request, "x-square-hmacsha256-signature", "@@@@"),
  timestamped: false,
});

describe("square: the signed URL", () => {
  it("Square's own SDK (WebhooksHelper.verifySignature) accepts the delivery the route accepts", async () => {
    const body = squareBody(uniqueKey("sq_sdk"));
    const signatureKey = secretValue("square", "CURRENT");
    const signatureHeader = hmac("sha256", signatureKey, NOTIFICATION_URL, body).toString("base64");
    expect(
      await WebhooksHelper.verifySignature({
        requestBody: body,
        signatureHeader,
        signatureKey,
        notificationUrl: NOTIFICATION_URL,
      }),
    ).toBe(true);
    expect(
      await WebhooksHelper.verifySignature({
        requestBody: body,
        signatureHeader,
        signatureKey,
        notificationUrl: "https://receiver.test/webhooks/pv-square",
      }),
    ).toBe(false);
    await expectAccepted("pv-square", { body, headers: { "x-square-hmacsha256-signature": signatureHeader } });
  });

  it("a signature over another URL than the registered notification_url is refused", async () => {
    const body = squareBody(uniqueKey("sq_url"));
    const overRequestUrl = hmac(
      "sha256",
      secretValue("square", "CURRENT"),
      "https://receiver.test/webhooks/pv-square",
      body,
    );
    await expectRejectedAndNothingWritten("pv-square", {
      body,
      headers: { "x-square-hmacsha256-signature": overRequestUrl.toString("base64") },
    });
  });
});
