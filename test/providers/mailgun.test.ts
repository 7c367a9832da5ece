import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  adapterContract,
  claimAnswer,
  expectAccepted,
  expectRejectedAndNothingWritten,
  nowSeconds,
  type SignedRequest,
  secretValue,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
} from "./support/contract";
import { hmac } from "./support/signers";

// Mailgun publishes no signer; node:crypto signs with the documented recipe: hex HMAC-SHA256 of timestamp ‖ token.
function mailgunBody(
  secret: string,
  eventKey: string,
  timestamp: number,
  token = `tok${eventKey}`.padEnd(50, "x"),
  signature?: string,
) {
  return JSON.stringify({
    signature: {
      timestamp: String(timestamp),
      token,
      signature: signature ?? hmac("sha256", secret, String(timestamp), token).toString("hex"),
    },
    "event-data": {
      id: eventKey,
      event: "delivered",
      timestamp: 1_700_000_000.25,
      message: { headers: { "message-id": `msg-${eventKey}@example.com` } },
    },
  });
}

function replaceSignatureField(request: SignedRequest, field: "signature" | "token", value: string): SignedRequest {
  const parsed = JSON.parse(request.body as string);
  parsed.signature[field] = value;
  return { ...request, body: JSON.stringify(parsed) };
}

adapterContract({
  name: "mailgun",
  sign: ({ secret, eventKey, timestamp }) => ({
    body: mailgunBody(secret, eventKey, timestamp),
    headers: { "content-type": "application/json" },
  }),
  // The key is the signed token (the unsigned event-data.id rides along as an annotation).
  expected: ({ eventKey }, request) => ({
    eventKey: JSON.parse(request.body as string).signature.token,
    eventType: "delivered",
    subjectId: `msg-${eventKey}@example.com`,
    occurredAt: 1_700_000_000_250,
    kept: { "mailgun-event-id": eventKey },
  }),
  // The signature lives in the body: there is no signature header to remove or inflate (see the tests below).
  signatureHeaders: [],
  malformEncoding: (request) => replaceSignatureField(request, "signature", "abc"),
  junkSignature: (request) => replaceSignatureField(request, "signature", "zz zz,zz"),
  timestamped: true,
  // Only timestamp ‖ token is signed: the tampered byte must be one of those.
  tamper: (request) => {
    const token = JSON.parse(request.body as string).signature.token as string;
    return replaceSignatureField(request, "token", (token[0] === "a" ? "b" : "a") + token.slice(1));
  },
});

describe("mailgun: signature fields in the body", () => {
  it("a body without its signature fields, or with an oversized token, is refused", async () => {
    const eventKey = uniqueKey("mg_missing");
    await expectRejectedAndNothingWritten("pv-mailgun", {
      body: JSON.stringify({ "event-data": { id: eventKey } }),
      headers: {},
    });
    const huge = "t".repeat(64 * 1024);
    const secret = secretValue("mailgun", "CURRENT");
    await expectRejectedAndNothingWritten("pv-mailgun", {
      body: mailgunBody(secret, eventKey, nowSeconds(), huge),
      headers: {},
    });
  });

  it("legacy form-encoded deliveries (routes) verify from their timestamp, token and signature fields", async () => {
    const timestamp = String(nowSeconds());
    const token = uniqueKey("mg_form_token").padEnd(50, "y");
    const form = new URLSearchParams({
      timestamp,
      token,
      signature: hmac("sha256", secretValue("mailgun", "CURRENT"), timestamp, token).toString("hex"),
      recipient: "inbox@example.com",
    });
    await expectAccepted("pv-mailgun", {
      body: form.toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
  });

  it("documents the scheme's limit: event-data outside the signed fields is not covered by the signature", async () => {
    const eventKey = uniqueKey("mg_unsigned_part");
    const body = mailgunBody(secretValue("mailgun", "CURRENT"), eventKey, nowSeconds()).replace(
      '"delivered"',
      '"failed"',
    );
    const receiptId = await expectAccepted("pv-mailgun", { body, headers: {} });
    expect((await storedReceipt("pv-mailgun", receiptId)).eventType).toBe("failed");
  });

  it("one signed timestamp and token is one event: a second body under them is quarantined, never a new event", async () => {
    const timestamp = nowSeconds();
    const token = uniqueKey("mg_reused").padEnd(50, "z");
    const secret = secretValue("mailgun", "CURRENT");
    const captured = {
      body: mailgunBody(secret, uniqueKey("mg_first"), timestamp, token),
      headers: { "content-type": "application/json" },
    };
    const before = await storedCounts("pv-mailgun");
    const accepted = await claimAnswer(await send("pv-mailgun", captured));
    expect(accepted.status).toBe("accepted");
    expect(await claimAnswer(await send("pv-mailgun", captured))).toEqual({
      status: "duplicate",
      receipt: accepted.receipt,
    });
    // The MAC covers timestamp ‖ token only: the same triple beside other event data must not pass as new events.
    for (const other of [uniqueKey("mg_second"), uniqueKey("mg_third")]) {
      expect(
        await claimAnswer(
          await send("pv-mailgun", { ...captured, body: mailgunBody(secret, other, timestamp, token) }),
        ),
      ).toEqual({
        status: "quarantined",
        receipt: accepted.receipt,
      });
    }
    expect(await storedCounts("pv-mailgun")).toEqual({ claims: before.claims + 1, receipts: before.receipts + 1 });
    const quarantined = await env.DB.prepare(
      "SELECT COUNT(*) AS count FROM quarantine WHERE source = ? AND event_key = ?",
    )
      .bind("pv-mailgun", token)
      .first<{ count: number }>();
    expect(quarantined?.count).toBe(2);
  });
});
