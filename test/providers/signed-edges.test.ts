import { describe, expect, it } from "vitest";
import {
  boundedEntries,
  DEFAULT_TOLERANCE_SECONDS,
  MAX_HEADER_CHARS,
  MAX_SIGNATURE_ENTRIES,
  parseUnixSeconds,
  readHeader,
} from "../../src/providers/signed";
import { slack } from "../../src/providers/slack";
import { stripe } from "../../src/providers/stripe";
import type { DeliveryInput } from "../../src/providers/types";
import { hmac } from "./support/signers";

/**
 * The shared verification steps at their exact edges (src/providers/signed.ts): a timestamp exactly at the
 * tolerance either side of now, the longest header and the most signature entries still read, a time with junk
 * after its digits, and a signature under another version's prefix. Signed with node:crypto, never src/crypto.
 */

const SECRET = "whsec_edges_secret";
const now = Date.parse("2026-12-01T10:00:00Z");
const nowSeconds = Math.floor(now / 1000);
const body = JSON.stringify({ id: "evt_edges", type: "invoice.paid", created: nowSeconds });

function stripeInput(signedAt: number): DeliveryInput {
  const signature = hmac("sha256", SECRET, `${signedAt}.`, body).toString("hex");
  return {
    rawBody: new TextEncoder().encode(body),
    headers: new Headers({ "stripe-signature": `t=${signedAt},v1=${signature}` }),
    url: "https://receiver.test/webhooks/stripe",
    secrets: [{ name: "S", value: SECRET }],
    now,
    options: {},
  };
}

describe("the timestamp tolerance, at its edges", () => {
  it("takes a delivery signed exactly the tolerance ago, and refuses one a second older", async () => {
    expect((await stripe.verify(stripeInput(nowSeconds - DEFAULT_TOLERANCE_SECONDS))).kind).toBe("event");
    expect(await stripe.verify(stripeInput(nowSeconds - DEFAULT_TOLERANCE_SECONDS - 1))).toEqual({
      kind: "rejected",
      reason: "timestamp-out-of-tolerance",
    });
  });

  it("refuses a delivery signed further in the future than the tolerance, as it does one too old", async () => {
    expect((await stripe.verify(stripeInput(nowSeconds + DEFAULT_TOLERANCE_SECONDS))).kind).toBe("event");
    expect(await stripe.verify(stripeInput(nowSeconds + DEFAULT_TOLERANCE_SECONDS + 1))).toEqual({
      kind: "rejected",
      reason: "timestamp-out-of-tolerance",
    });
    expect(await stripe.verify(stripeInput(nowSeconds + 86_400))).toEqual({
      kind: "rejected",
      reason: "timestamp-out-of-tolerance",
    });
  });
});

describe("bounded header reads, at their edges", () => {
  it("reads a header of exactly MAX_HEADER_CHARS, and refuses one character more", async () => {
    const headers = new Headers({
      "x-long": "a".repeat(MAX_HEADER_CHARS),
      "x-longer": "a".repeat(MAX_HEADER_CHARS + 1),
    });
    expect(readHeader(headers, "x-long")).toHaveLength(MAX_HEADER_CHARS);
    expect(() => readHeader(headers, "x-longer")).toThrow();
  });

  it("reads a list of exactly MAX_SIGNATURE_ENTRIES entries, and refuses one more", () => {
    const entries = (count: number) => Array.from({ length: count }, (_, index) => `v1=${index}`).join(",");
    expect(boundedEntries(entries(MAX_SIGNATURE_ENTRIES), ",")).toHaveLength(MAX_SIGNATURE_ENTRIES);
    expect(boundedEntries(entries(MAX_SIGNATURE_ENTRIES + 1), ",")).toBeNull();
  });

  it("reads a time of digits only: junk after the digits is no time", () => {
    expect(parseUnixSeconds(String(nowSeconds))).toBe(nowSeconds);
    for (const junk of [`${nowSeconds}abc`, `${nowSeconds}.5`, `${nowSeconds} `, `${nowSeconds}e3`])
      expect(parseUnixSeconds(junk), junk).toBeNull();
  });
});

describe("a signature's version prefix", () => {
  it("refuses Slack's signature under any prefix but v0=, though the hex after it is right", async () => {
    const slackBody = JSON.stringify({ type: "event_callback", event_id: "Ev_edges", event: { type: "message" } });
    const hex = hmac("sha256", SECRET, `v0:${nowSeconds}:`, slackBody).toString("hex");
    const input = (signature: string): DeliveryInput => ({
      rawBody: new TextEncoder().encode(slackBody),
      headers: new Headers({ "x-slack-signature": signature, "x-slack-request-timestamp": String(nowSeconds) }),
      url: "https://receiver.test/webhooks/slack",
      secrets: [{ name: "S", value: SECRET }],
      now,
      options: {},
    });
    expect((await slack.verify(input(`v0=${hex}`))).kind).toBe("event");
    for (const prefix of ["v1=", "v9=", "xx="])
      expect(await slack.verify(input(`${prefix}${hex}`)), prefix).toEqual({
        kind: "rejected",
        reason: "malformed-signature",
      });
  });
});
