import fc from "fast-check";
import { nowSeconds, secretValue, withHeader } from "../support/contract";
import { hmac } from "../support/signers";
import { composed, type Delivery, onFirst, type Sender, type Variant } from "./property";
import { unsignedHeaders } from "./reencode";

/**
 * Senders whose signature covers the whole body (alone, or with a time or URL): no byte of the body can change, so
 * every variant is a header one — the unsigned id, type and retry headers dropped or changed, the signature header
 * spelled another way. A key in an unsigned header (GitHub, Shopify, Linear) is where this matters: a replay under
 * a new id is the same bytes, a duplicate by the payload hash.
 */

const hex = (bytes: Buffer) => bytes.toString("hex");
const b64 = (bytes: Buffer) => bytes.toString("base64");
const secret = (name: string) => secretValue(name, "CURRENT");
const json = { "content-type": "application/json" };
const _url = (source: string) => `https://receiver.test/webhooks/${source}`;

/** A `name=value` signature list spelled another way: reordered, with a junk entry, with spaces after separators. */
export function signatureListRespelled(header: string, separator: string, junkEntry: string): fc.Arbitrary<Variant> {
  const respell = (label: string, change: (entries: string[]) => string[], joiner = separator) =>
    onFirst(`${header} ${label}`, (delivery) => {
      // An earlier change in the same variant may have renamed the header (Standard Webhooks' two families).
      const value = delivery.headers[header];
      return value === undefined
        ? delivery
        : (withHeader(delivery, header, change(value.split(separator)).join(joiner)) as Delivery);
    });
  return fc.constantFrom(
    respell("reordered", (entries) => [...entries].reverse()),
    respell("with a junk entry first", (entries) => [junkEntry, ...entries]),
    respell("with a junk entry last", (entries) => [...entries, junkEntry]),
    respell("spaced", (entries) => entries, `${separator} `),
  );
}

function stripe(): Sender {
  return {
    provider: "stripe",
    source: "pv-stripe",
    deliver(marker) {
      const body = JSON.stringify({ id: `evt_${marker}`, type: "invoice.paid", data: { object: { id: marker } } });
      const t = nowSeconds();
      const signature = `t=${t},v1=${hex(hmac("sha256", secret("stripe"), `${t}.`, body))}`;
      return { body, headers: { ...json, "stripe-signature": signature } };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders(["content-type"]),
        signatureListRespelled("stripe-signature", ",", `v1=${"0".repeat(64)}`),
      ),
    ),
  };
}

function github(): Sender {
  return {
    provider: "github",
    source: "pv-github",
    deliver(marker) {
      const body = JSON.stringify({ action: "opened", marker });
      return {
        body,
        headers: {
          ...json,
          "x-hub-signature-256": `sha256=${hex(hmac("sha256", secret("github"), body))}`,
          "x-github-delivery": crypto.randomUUID(),
          "x-github-event": "issues",
          "x-github-hook-id": "42",
        },
      };
    },
    variants: composed(unsignedHeaders(["x-github-delivery", "x-github-event", "x-github-hook-id"])),
  };
}

function shopify(): Sender {
  return {
    provider: "shopify",
    source: "pv-shopify",
    deliver(marker) {
      const body = JSON.stringify({ id: 820982911946154500, marker });
      return {
        body,
        headers: {
          ...json,
          "x-shopify-hmac-sha256": b64(hmac("sha256", secret("shopify"), body)),
          "x-shopify-webhook-id": crypto.randomUUID(),
          "x-shopify-event-id": crypto.randomUUID(),
          "x-shopify-topic": "orders/create",
          "x-shopify-triggered-at": new Date().toISOString(),
        },
      };
    },
    variants: composed(
      unsignedHeaders(["x-shopify-webhook-id", "x-shopify-event-id", "x-shopify-topic", "x-shopify-triggered-at"]),
    ),
  };
}

/** Slack and Zoom: `v0=` HMAC over `v0:<timestamp>:<body>`. */
function v0(provider: "slack" | "zoom", prefix: "x-slack" | "x-zm", body: (marker: string) => object, extra: string[]) {
  const [signatureHeader, timestampHeader] =
    prefix === "x-slack"
      ? ["x-slack-signature", "x-slack-request-timestamp"]
      : ["x-zm-signature", "x-zm-request-timestamp"];
  return {
    provider,
    source: `pv-${provider}`,
    deliver(marker: string): Delivery {
      const text = JSON.stringify(body(marker));
      const t = String(nowSeconds());
      const signature = `v0=${hex(hmac("sha256", secret(provider), `v0:${t}:`, text))}`;
      return { body: text, headers: { ...json, [signatureHeader]: signature, [timestampHeader]: t } };
    },
    variants: composed(unsignedHeaders(["content-type", ...extra])),
  } satisfies Sender;
}

function paddle(): Sender {
  return {
    provider: "paddle",
    source: "pv-paddle",
    deliver(marker) {
      const body = JSON.stringify({ event_id: `evt_${marker}`, event_type: "transaction.paid", data: { id: marker } });
      const ts = nowSeconds();
      return {
        body,
        headers: {
          ...json,
          "paddle-signature": `ts=${ts};h1=${hex(hmac("sha256", secret("paddle"), `${ts}:`, body))}`,
        },
      };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders(["content-type"]),
        signatureListRespelled("paddle-signature", ";", `h1=${"ab".repeat(32)}`),
      ),
    ),
  };
}

function linear(): Sender {
  return {
    provider: "linear",
    source: "pv-linear",
    deliver(marker) {
      const body = JSON.stringify({
        type: "Issue",
        action: "create",
        data: { id: marker },
        webhookTimestamp: Date.now(),
      });
      return {
        body,
        headers: {
          ...json,
          "linear-signature": hex(hmac("sha256", secret("linear"), body)),
          "linear-delivery": crypto.randomUUID(),
          "linear-event": "Issue",
        },
      };
    },
    variants: composed(unsignedHeaders(["linear-delivery", "linear-event"])),
  };
}

export const bodySigned: readonly Sender[] = [
  stripe(),
  github(),
  shopify(),
  v0(
    "slack",
    "x-slack",
    (marker) => ({ type: "event_callback", event_id: `Ev${marker}`, event: { type: "message" } }),
    ["x-slack-retry-num", "x-slack-retry-reason"],
  ),
  v0(
    "zoom",
    "x-zm",
    (marker) => ({ event: "meeting.started", event_ts: Date.now(), payload: { object: { id: marker } } }),
    ["x-zm-trackingid"],
  ),
  paddle(),
  linear(),
];
