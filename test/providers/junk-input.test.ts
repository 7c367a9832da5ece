import { describe, expect, it } from "vitest";
import { adapterFor, knownProviderNames } from "../../src/providers/registry";
import type { SourceOptions } from "../../src/providers/types";

/**
 * Whatever arrives, an adapter answers "rejected" (a clean 401 at the route) and never throws (a 500). Every header
 * any adapter reads is filled with each kind of junk, over bodies that are empty, not UTF-8, not JSON, or JSON of
 * the wrong shape.
 */
const HEADERS = [
  "stripe-signature",
  "x-hub-signature-256",
  "x-hub-signature",
  "x-github-delivery",
  "x-github-event",
  "x-shopify-hmac-sha256",
  "x-shopify-webhook-id",
  "x-shopify-triggered-at",
  "x-slack-signature",
  "x-slack-request-timestamp",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "svix-id",
  "svix-timestamp",
  "svix-signature",
  "x-twilio-signature",
  "x-twilio-webhooks-signature-settings",
  "i-twilio-idempotency-token",
  "paddle-signature",
  "linear-signature",
  "linear-delivery",
  "x-square-hmacsha256-signature",
  "twitch-eventsub-message-id",
  "twitch-eventsub-message-timestamp",
  "twitch-eventsub-message-signature",
  "twitch-eventsub-message-type",
  "x-zm-signature",
  "x-zm-request-timestamp",
  "x-gitlab-token",
  "idempotency-key",
  "x-gitlab-event-uuid",
  "x-twilio-email-event-webhook-signature",
  "x-twilio-email-event-webhook-timestamp",
  "x-signature-ed25519",
  "x-signature-timestamp",
  "x-junk-signature",
  "x-junk-id",
  "x-junk-timestamp",
];

const JUNK_VALUES = [
  "=",
  ",,,",
  ";;;",
  "v1,",
  "v1a,",
  "t=,v1=",
  "ts=;h1=",
  "sha256=",
  "v0=",
  "abc",
  "%%%",
  "====",
  "A".repeat(4095),
  "A".repeat(5000),
  `t=1700000000,v1=${"g".repeat(64)}`,
  `ts=99999999999999;h1=${"0".repeat(64)}`,
  `v1,${"A".repeat(44)}`,
  "1e9",
  "-1",
  "9999999999999999999",
  "2019-13-45T99:99:99Z",
  "algorithm=HMAC_MD5",
  "null",
  "undefined",
];

const BODIES: Uint8Array[] = [
  new Uint8Array(0),
  new Uint8Array([0xff, 0xfe, 0x00, 0xc3, 0x28]),
  new TextEncoder().encode("not json at all"),
  new TextEncoder().encode('{"type":"url_verification","challenge":{"nested":true}}'),
  new TextEncoder().encode('{"signature":{"timestamp":"x","token":[],"signature":1},"event-data":null}'),
  new TextEncoder().encode(
    '{"type":1,"payload":{"plainToken":null},"event":"endpoint.url_validation","webhookTimestamp":"soon"}',
  ),
  new TextEncoder().encode("timestamp=1&token=&signature=zz&a=%E0%A4%A"),
  new TextEncoder().encode("[1,2,3]"),
];

const OPTIONS: Record<string, SourceOptions> = {
  generic: {
    signature_header: "x-junk-signature",
    id_header: "x-junk-id",
    timestamp_header: "x-junk-timestamp",
    signed_content: "{id}.{timestamp}.{body}",
    signature_separator: ",",
  },
  square: { notification_url: "https://hooks.example.com/square" },
};

const SECRETS = [
  { name: "HMAC", value: "secret" },
  { name: "WHSEC", value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" },
  { name: "WHPK", value: `whpk_${"A".repeat(43)}=` },
  { name: "HEX_KEY", value: "ab".repeat(32) },
  { name: "NOT_BASE64", value: "!!!" },
];

describe("junk input never throws", () => {
  for (const provider of knownProviderNames()) {
    it(`${provider}: every junk header and body is rejected, never thrown`, async () => {
      const adapter = adapterFor(provider)!;
      for (const value of JUNK_VALUES) {
        for (const rawBody of BODIES) {
          const headers = new Headers();
          for (const name of HEADERS) headers.set(name, value);
          const verdict = await adapter.verify({
            rawBody,
            headers,
            url: "https://receiver.test/webhooks/junk?bodySHA256=zz",
            secrets: SECRETS,
            now: 1_700_000_000_000,
            options: OPTIONS[provider] ?? {},
          });
          expect(verdict.kind, `${provider} ${JSON.stringify(value.slice(0, 20))}`).toBe("rejected");
        }
      }
    });
  }
});
