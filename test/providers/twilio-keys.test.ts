import { env } from "cloudflare:workers";
import twilioLibrary from "twilio";
import { describe, expect, it } from "vitest";
import { claimAnswer, secretValue, send, storedCounts, uniqueKey } from "./support/contract";

/**
 * Twilio signs the URL plus its form parameters sorted by name, values de-duplicated: not the bytes of the body.
 * Reordering the parameters, percent-encoding a letter or repeating a value keeps the signature valid, and the
 * `I-Twilio-Idempotency-Token` header is outside it. So every such variant of one captured delivery must meet the
 * first copy as a duplicate (src/model/claims.ts claimKeyOf: the claim key is the digest of the signed form).
 */
const { getExpectedTwilioSignature } = twilioLibrary;
const SOURCE = "pv-twilio";
const URL_LIVE = `https://receiver.test/webhooks/${SOURCE}`;
const FORM = { "content-type": "application/x-www-form-urlencoded" };

const statusCallback = (messageSid: string) => ({
  AccountSid: "AC0000",
  MessageSid: messageSid,
  MessageStatus: "delivered",
  Body: "hi & bye = ok",
});

async function dispositionOf(body: string, headers: Record<string, string>): Promise<string> {
  const response = await send(SOURCE, { url: URL_LIVE, body, headers: { ...FORM, ...headers } });
  expect(response.ok).toBe(true);
  return (await claimAnswer(response)).status;
}

/** After relaying every claim and quarantine into D1: the message's receipts, and the source's quarantine rows. */
async function storedFor(messageSid: string) {
  await storedCounts(SOURCE);
  const receipts = await env.DB.prepare("SELECT COUNT(*) AS count FROM receipts WHERE source = ? AND subject = ?")
    .bind(SOURCE, messageSid)
    .first<{ count: number }>();
  const quarantined = await env.DB.prepare("SELECT COUNT(*) AS count FROM quarantine WHERE source = ?")
    .bind(SOURCE)
    .first<{ count: number }>();
  return { receipts: receipts!.count, quarantined: quarantined!.count };
}

describe("twilio: every variant of one signed form is one event", () => {
  it("reordered, percent-encoded, repeated-value and token-dropped/changed copies are duplicates, never a second accept", async () => {
    const messageSid = `SM${uniqueKey("tw_variants")}`;
    const before = await storedFor(messageSid);
    const params = statusCallback(messageSid);
    const signature = getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), URL_LIVE, params);
    const signed = { "x-twilio-signature": signature };
    const token = { ...signed, "i-twilio-idempotency-token": uniqueKey("idem") };
    const body = new URLSearchParams(params).toString();
    const reordered = new URLSearchParams(Object.entries(params).reverse()).toString();
    const encodedLetter = body.replace("MessageStatus=delivered", "MessageStatus=%64elivered");
    const repeated = `${body}&MessageStatus=delivered`;
    expect(new Set([body, reordered, encodedLetter, repeated]).size).toBe(4);

    expect(await dispositionOf(body, token)).toBe("accepted");
    expect(await dispositionOf(body, token)).toBe("duplicate");
    expect(await dispositionOf(reordered, token)).toBe("duplicate");
    expect(await dispositionOf(encodedLetter, token)).toBe("duplicate");
    expect(await dispositionOf(repeated, token)).toBe("duplicate");
    expect(await dispositionOf(reordered, signed)).toBe("duplicate");
    expect(await dispositionOf(body, signed)).toBe("duplicate");
    expect(await dispositionOf(encodedLetter, { ...signed, "i-twilio-idempotency-token": "forged" })).toBe("duplicate");
    expect(await storedFor(messageSid)).toEqual({ receipts: 1, quarantined: before.quarantined });
  });

  it("without a token, a reordered first copy and the canonical one are still one event", async () => {
    const messageSid = `SM${uniqueKey("tw_notoken")}`;
    const before = await storedFor(messageSid);
    const params = statusCallback(messageSid);
    const signed = {
      "x-twilio-signature": getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), URL_LIVE, params),
    };
    const reordered = new URLSearchParams(Object.entries(params).reverse()).toString();
    expect(await dispositionOf(reordered, signed)).toBe("accepted");
    expect(await dispositionOf(new URLSearchParams(params).toString(), signed)).toBe("duplicate");
    expect(await storedFor(messageSid)).toEqual({ receipts: 1, quarantined: before.quarantined });
  });

  it("a different signed form (another status of the same message) is still its own event", async () => {
    const messageSid = `SM${uniqueKey("tw_distinct")}`;
    const before = await storedFor(messageSid);
    for (const status of ["sent", "delivered"]) {
      const params = { ...statusCallback(messageSid), MessageStatus: status };
      const signature = getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), URL_LIVE, params);
      expect(await dispositionOf(new URLSearchParams(params).toString(), { "x-twilio-signature": signature })).toBe(
        "accepted",
      );
    }
    expect(await storedFor(messageSid)).toEqual({ receipts: 2, quarantined: before.quarantined });
  });
});
