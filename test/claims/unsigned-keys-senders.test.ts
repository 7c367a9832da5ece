import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { hmac, sha256Hex } from "../providers/support/signers";
import { post } from "../support/deliveries";
import { settle, settleEachTest } from "../support/storage";

/**
 * The audit behind docs/providers.md's dedupe-key table, through the real route: every sender whose dedupe key the
 * signature leaves out (a header, or a token scheme that signs nothing) answers a copy of one signed delivery under
 * a second key `duplicate`, and D1 holds one receipt for those bytes. GitHub's own case, with concurrency and the
 * handler, is test/claims/unsigned-keys.test.ts.
 */

const SECRET = () => (env as unknown as Record<string, string>).UK_HMAC_SECRET!;
const b64 = (bytes: Buffer) => bytes.toString("base64");
const hex = (bytes: Buffer) => bytes.toString("hex");
const nowIso = () => new Date().toISOString();

interface UnsignedKeySender {
  provider: string;
  /** The headers of a genuine delivery of `body` under dedupe key `key`. */
  headers(body: string, key: string): Record<string, string>;
  /** The body, when the scheme needs something of its own in it (Linear signs its time in the body). */
  body?(unique: string): string;
}

const senders: UnsignedKeySender[] = [
  {
    provider: "shopify",
    headers: (body, key) => ({
      "x-shopify-hmac-sha256": b64(hmac("sha256", SECRET(), body)),
      "x-shopify-webhook-id": key,
      "x-shopify-topic": "orders/create",
    }),
  },
  {
    provider: "linear",
    body: (unique) =>
      JSON.stringify({ type: "Issue", action: "create", data: { id: unique }, webhookTimestamp: Date.now() }),
    headers: (body, key) => ({ "linear-signature": hex(hmac("sha256", SECRET(), body)), "linear-delivery": key }),
  },
  {
    provider: "woocommerce",
    headers: (body, key) => ({
      "x-wc-webhook-signature": b64(hmac("sha256", SECRET(), body)),
      "x-wc-webhook-delivery-id": key,
    }),
  },
  {
    provider: "sentry",
    headers: (body, key) => ({ "sentry-hook-signature": hex(hmac("sha256", SECRET(), body)), "request-id": key }),
  },
  {
    provider: "razorpay",
    headers: (body, key) => ({
      "x-razorpay-signature": hex(hmac("sha256", SECRET(), body)),
      "x-razorpay-event-id": key,
    }),
  },
  {
    provider: "bitbucket",
    headers: (body, key) => ({
      "x-hub-signature": `sha256=${hex(hmac("sha256", SECRET(), body))}`,
      "x-request-uuid": key,
    }),
  },
  {
    provider: "zendesk",
    headers(body, key) {
      const at = nowIso();
      return {
        "x-zendesk-webhook-signature": b64(hmac("sha256", SECRET(), at, body)),
        "x-zendesk-webhook-signature-timestamp": at,
        "x-zendesk-webhook-invocation-id": key,
      };
    },
  },
  {
    provider: "box",
    headers(body, key) {
      const at = nowIso();
      return {
        "box-signature-primary": b64(hmac("sha256", SECRET(), body, at)),
        "box-delivery-timestamp": at,
        "box-delivery-id": key,
      };
    },
  },
  {
    provider: "gitlab",
    headers: (_body, key) => ({ "x-gitlab-token": SECRET(), "idempotency-key": key, "x-gitlab-event": "Push Hook" }),
  },
];

let counter = 0;
const unique = (name: string) => `${name}_${Date.now().toString(36)}_${++counter}`;

settleEachTest();

describe("senders whose dedupe key the signature does not cover", { timeout: 60_000 }, () => {
  for (const sender of senders) {
    it(`${sender.provider}: the same signed body under a second key is a duplicate, one receipt in D1`, async () => {
      const source = `uk-${sender.provider}`;
      const marker = unique(sender.provider);
      const body = sender.body?.(marker) ?? JSON.stringify({ id: marker, event: "thing.happened" });
      const send = (key: string) =>
        post(`/webhooks/${source}`, body, { "content-type": "application/json", ...sender.headers(body, key) });

      const first = await send(unique("key_first"));
      expect(first.status).toBe(200);
      const original = await first.json<{ status: string; receipt: string }>();
      expect(original.status).toBe("accepted");
      const replay = await send(unique("key_replayed"));
      expect(replay.status).toBe(200);
      expect(await replay.json()).toEqual({ status: "duplicate", receipt: original.receipt });

      await settle();
      const { results } = await env.DB.prepare("SELECT id FROM receipts WHERE source = ? AND payload_sha256 = ?")
        .bind(source, sha256Hex(body))
        .all();
      expect(results).toEqual([{ id: original.receipt }]);
    });
  }
});
