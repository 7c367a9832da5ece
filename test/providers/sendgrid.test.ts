import { EventWebhook } from "@sendgrid/eventwebhook";
import { describe, expect, it } from "vitest";
import { ecdsaP256SignatureToRaw } from "../../src/crypto/verify";
import { sendgrid } from "../../src/providers/sendgrid";
import {
  adapterContract,
  expectAccepted,
  header,
  nowSeconds,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { ecdsaDerSign, sha256Hex } from "./support/signers";

// @sendgrid/eventwebhook only verifies; node:crypto signs the way SendGrid does: DER ECDSA P-256 over ts ‖ body.
const events = (marker: string) =>
  JSON.stringify([
    { email: "a@example.com", event: "delivered", sg_event_id: `${marker}-1`, timestamp: 1_700_000_000 },
    { email: "b@example.com", event: "open", sg_event_id: `${marker}-2`, timestamp: 1_700_000_001 },
  ]);

function signSendgrid(secretName: string, body: string, timestamp: number) {
  return {
    body,
    headers: {
      "x-twilio-email-event-webhook-signature": ecdsaDerSign(secretName, String(timestamp), body).toString("base64"),
      "x-twilio-email-event-webhook-timestamp": String(timestamp),
      "content-type": "application/json",
    },
  };
}

adapterContract({
  name: "sendgrid",
  sign: ({ secretName, eventKey, timestamp }) => signSendgrid(secretName, events(eventKey), timestamp),
  // A delivery is a batch with no batch id: the key is the payload hash.
  expected: (_args, request) => ({
    eventKey: sha256Hex(request.body as string),
    eventType: "event-batch",
    kept: { "event-key-origin": "payload-sha256" },
  }),
  signatureHeaders: ["x-twilio-email-event-webhook-signature", "x-twilio-email-event-webhook-timestamp"],
  malformEncoding: (request) => withHeader(request, "x-twilio-email-event-webhook-signature", "MEUCIQ"),
  junkSignature: (request) =>
    withHeader(
      request,
      "x-twilio-email-event-webhook-signature",
      `${header(request, "x-twilio-email-event-webhook-signature").slice(0, 12)}==`,
    ),
  timestamped: true,
});

describe("sendgrid: key and signature shapes", () => {
  it("SendGrid's own verifier (@sendgrid/eventwebhook) accepts the delivery the route accepts", async () => {
    const body = events(uniqueKey("sg_library"));
    const timestamp = nowSeconds();
    const request = signSendgrid("PV_SENDGRID_CURRENT", body, timestamp);
    const library = new EventWebhook();
    const publicKey = library.convertPublicKeyToECDSA(secretValue("sendgrid", "CURRENT"));
    expect(
      library.verifySignature(
        publicKey,
        body,
        request.headers["x-twilio-email-event-webhook-signature"],
        String(timestamp),
      ),
    ).toBe(true);
    expect(
      library.verifySignature(
        publicKey,
        `${body} `,
        request.headers["x-twilio-email-event-webhook-signature"],
        String(timestamp),
      ),
    ).toBe(false);
    await expectAccepted("pv-sendgrid", request);
  });

  it("accepts the verification key with PEM armour, as some consoles show it", async () => {
    const body = events(uniqueKey("sg_pem"));
    const timestamp = nowSeconds();
    const pem = `-----BEGIN PUBLIC KEY-----\n${secretValue("sendgrid", "CURRENT")
      .match(/.{1,64}/g)!
      .join("\n")}\n-----END PUBLIC KEY-----`;
    const request = signSendgrid("PV_SENDGRID_CURRENT", body, timestamp);
    const verdict = await sendgrid.verify({
      rawBody: new TextEncoder().encode(body),
      headers: new Headers(request.headers),
      url: "https://receiver.test/webhooks/x",
      secrets: [{ name: "S", value: pem }],
      now: timestamp * 1000,
      options: {},
    });
    expect(verdict.kind).toBe("event");
  });

  it("DER signatures with and without leading zero bytes convert to r‖s; malformed DER is refused", () => {
    const der = ecdsaDerSign("PV_SENDGRID_CURRENT", "x");
    expect(ecdsaP256SignatureToRaw(new Uint8Array(der))?.length).toBe(64);
    expect(ecdsaP256SignatureToRaw(new Uint8Array([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x05, 0x01]))).toBeNull();
    expect(ecdsaP256SignatureToRaw(new Uint8Array(der.subarray(0, der.length - 1)))).toBeNull();
  });

  it("a batch resent with the same bytes is a duplicate of the first receipt", async () => {
    const body = events(uniqueKey("sg_resend"));
    const receiptId = await expectAccepted("pv-sendgrid", signSendgrid("PV_SENDGRID_CURRENT", body, nowSeconds()));
    const { exports } = await import("cloudflare:workers");
    const again = await exports.default.fetch(
      new Request("https://receiver.test/webhooks/pv-sendgrid", {
        method: "POST",
        ...signSendgrid("PV_SENDGRID_CURRENT", body, nowSeconds() + 1),
      }),
    );
    expect(await again.json()).toEqual({ status: "duplicate", receipt: receiptId });
    expect((await storedReceipt("pv-sendgrid", receiptId)).eventKey).toBe(sha256Hex(body));
  });
});
