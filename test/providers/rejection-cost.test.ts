import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { adapterFor, providers } from "../../src/providers/registry";
import { MAX_HEADER_CHARS, MAX_VERIFICATION_STEPS } from "../../src/providers/signed";
import { MAX_UNVERIFIED_FORM_PARAMS, MAX_UNVERIFIED_JSON_VALUES } from "../../src/providers/unverified";
import { post } from "../support/deliveries";

/**
 * Invariant 10, rejection is cheap: the worst body and header shapes we can think of, sent unsigned through the
 * real route to a source of every adapter, each answer a 4xx after bounded work. Counted, not timed: every JSON
 * value built (JSON.parse, spied on with a counting reviver), every form entry scanned (URLSearchParams'
 * lookups and walks, counted on its prototype) and every MAC (crypto.subtle) while a request is in flight.
 */

const BODY_BYTES = 512 * 1024;
const encoder = new TextEncoder();

/** `open` + `unit` (its `#` numbered) repeated to about BODY_BYTES + `close`. */
function repeated(open: string, unit: string, close: string, separator = ","): Uint8Array {
  const units: string[] = [];
  for (let length = open.length + close.length; length < BODY_BYTES; ) {
    const next = unit.replaceAll("#", String(units.length));
    units.push(next);
    length += next.length + separator.length;
  }
  return encoder.encode(open + units.join(separator) + close);
}

const nested = (open: string, leaf: string, close: string) => {
  const depth = Math.floor(BODY_BYTES / (open.length + close.length));
  return encoder.encode(open.repeat(depth) + leaf + close.repeat(depth));
};

/** What the schemes that sign inside their body (SNS, Mailgun, monday.com, Notion, Graph, Linear) look for first. */
const SIGNATURE_FIELDS =
  '"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-east-1:1:t","Message":"x","Timestamp":"2026-01-01T00:00:00Z",' +
  '"SignatureVersion":"1","Signature":"AAAA","SigningCertURL":"https://sns.us-east-1.amazonaws.com/c.pem",' +
  '"signature":{"timestamp":"1700000000","token":"t","signature":"ab"},"challenge":"c","verification_token":"secret_x",' +
  '"webhookTimestamp":1700000000000,';

const SHAPES: Record<string, Uint8Array> = {
  "wide object": repeated("{", '"k#":0', "}"),
  "wide object with signature fields": repeated(`{${SIGNATURE_FIELDS}`, '"k#":0', "}"),
  "long array": repeated("[", "0", "]"),
  "deep arrays": nested("[", "0", "]"),
  "deep objects": nested('{"a":', "0", "}"),
  "Adyen batch": repeated(
    '{"notificationItems":[',
    '{"NotificationRequestItem":{"pspReference":"p#","eventCode":"AUTHORISATION","success":"true","additionalData":{"hmacSignature":"AAAA"}}}',
    "]}",
  ),
  "Graph batch": repeated('{"value":[', '{"clientState":"s","changeType":"created","resource":"r#"}', "]}"),
  "SendGrid batch": repeated("[", '{"sg_event_id":"e#","event":"delivered"}', "]"),
  "many form params": repeated("", "p#=", "", "&"),
  "one name repeated": repeated("", "a=#", "", "&"),
  "Mailgun form with many params": repeated("timestamp=1700000000&token=t&signature=ab&", "p#=", "", "&"),
};

/** Every signature, timestamp and id header any adapter reads. */
const SIGNATURE_HEADERS = [
  "stripe-signature",
  "x-hub-signature-256",
  "x-hub-signature",
  "x-github-delivery",
  "x-shopify-hmac-sha256",
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
  "paddle-signature",
  "linear-signature",
  "x-square-hmacsha256-signature",
  "twitch-eventsub-message-id",
  "twitch-eventsub-message-timestamp",
  "twitch-eventsub-message-signature",
  "x-zm-signature",
  "x-zm-request-timestamp",
  "x-gitlab-token",
  "x-twilio-email-event-webhook-signature",
  "x-twilio-email-event-webhook-timestamp",
  "x-signature-ed25519",
  "x-signature-timestamp",
  "x-hubspot-signature-v3",
  "x-hubspot-request-timestamp",
  "x-zendesk-webhook-signature",
  "x-zendesk-webhook-signature-timestamp",
  "x-wc-webhook-signature",
  "typeform-signature",
  "calendly-webhook-signature",
  "x-vercel-signature",
  "sentry-hook-signature",
  "mux-signature",
  "x-pagerduty-signature",
  "x-signature",
  "x-razorpay-signature",
  "x-cc-webhook-signature",
  "box-signature-primary",
  "box-signature-secondary",
  "box-delivery-timestamp",
  "x-docusign-signature-1",
  "x-docusign-signature-2",
  "x-dropbox-signature",
  "x-telegram-bot-api-secret-token",
  "authorization",
  "x-hook-signature",
  "x-notion-signature",
  "plaid-verification",
  "x-webhook-signature",
  "x-okta-verification-challenge",
];

/** A signature list just under the header cap: hundreds of well-formed entries to split and count. */
const LONG_LIST = (() => {
  let list = `t=${Math.floor(Date.now() / 1000)}`;
  const entry = `,v1=${"ab".repeat(32)}`;
  while (list.length + entry.length <= MAX_HEADER_CHARS) list += entry;
  return list;
})();

type Tables = Record<string, { provider: string; signature_header?: string }>;

/** Long signature lists in every signature header the source's adapter could read, and 200 more headers. */
function forgedHeaders(table: Tables[string]): Record<string, string> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  for (const name of [...SIGNATURE_HEADERS, ...(table.signature_header ? [table.signature_header] : [])])
    headers[name] = LONG_LIST;
  for (let index = 0; index < 200; index++) headers[`x-padding-${index}`] = `v1=${"ab".repeat(32)}`;
  return headers;
}

/** One fixture source per adapter (the first listed), skipping those made to fail before verification. */
function sourcePerAdapter(): Map<string, string> {
  const bySource = new Map<string, string>();
  for (const [name, table] of Object.entries(env.SOURCES as unknown as Tables)) {
    const adapter = adapterFor(table.provider)?.provider;
    if (!adapter || bySource.has(adapter) || !name.startsWith("pv-") || /expired|unset|wrong/.test(name)) continue;
    bySource.set(adapter, name);
  }
  return bySource;
}

const work = { jsonValues: 0, formEntries: 0, macs: 0 };
let counting = false;

/** Past this many form entries scanned, a request is plainly quadratic: stop it rather than wait a minute. */
const FORM_ABORT = 100 * MAX_UNVERIFIED_FORM_PARAMS;

/** Every lookup by name and every walk over a form scans all its entries; each is counted as that many. */
const FORM_SCANS = ["get", "getAll", "has", "keys", "values", "entries", Symbol.iterator] as const;
const formPrototype = URLSearchParams.prototype as unknown as Record<PropertyKey, (...args: unknown[]) => unknown>;
const formOriginals = new Map(FORM_SCANS.map((method) => [method, formPrototype[method]!] as const));
const forEachEntry = URLSearchParams.prototype.forEach;

function countFormScans() {
  for (const [method, original] of formOriginals) {
    formPrototype[method] = function (this: URLSearchParams, ...args: unknown[]) {
      if (counting) {
        forEachEntry.call(this, () => void (work.formEntries += 1));
        if (work.formEntries > FORM_ABORT) throw new Error("form scanned over and over before verification");
      }
      return original.apply(this, args);
    };
  }
}

beforeAll(() => {
  const parse = JSON.parse;
  vi.spyOn(JSON, "parse").mockImplementation(
    (text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
      if (!counting) return parse(text, reviver);
      return parse(text, function (this: unknown, key, value) {
        work.jsonValues += 1;
        return reviver ? reviver.call(this, key, value) : value;
      });
    },
  );
  countFormScans();
  const sign = crypto.subtle.sign.bind(crypto.subtle);
  const verify = crypto.subtle.verify.bind(crypto.subtle);
  vi.spyOn(crypto.subtle, "sign").mockImplementation(
    (algorithm, key, data) => ((work.macs += counting ? 1 : 0), sign(algorithm, key, data)),
  );
  vi.spyOn(crypto.subtle, "verify").mockImplementation(
    (algorithm, key, signature, data) => ((work.macs += counting ? 1 : 0), verify(algorithm, key, signature, data)),
  );
});

afterAll(() => {
  for (const [method, original] of formOriginals) formPrototype[method] = original;
  vi.restoreAllMocks();
});

async function measured(source: string, body: Uint8Array, headers: Record<string, string>) {
  Object.assign(work, { jsonValues: 0, formEntries: 0, macs: 0 });
  counting = true;
  try {
    const response = await post(`/webhooks/${source}`, body, headers);
    await response.arrayBuffer();
    return { status: response.status, ...work };
  } finally {
    counting = false;
  }
}

const sources = sourcePerAdapter();

describe("an unsigned request costs bounded work, whatever its shape, at every adapter", () => {
  it("every adapter has a fixture source to send the shapes to", () => {
    expect([...providers.keys()].filter((adapter) => !sources.has(adapter))).toEqual([]);
  });

  for (const [adapter, source] of sources) {
    it(`${adapter} (${source}): every worst shape is a 4xx after bounded parsing and MACs`, async () => {
      const table = (env.SOURCES as unknown as Tables)[source]!;
      const headerSets = {
        "no headers": { "content-type": "application/json" },
        "long signature lists and 200 headers": forgedHeaders(table),
      };
      const over: string[] = [];
      for (const [shape, body] of Object.entries(SHAPES)) {
        for (const [headerSet, headers] of Object.entries(headerSets)) {
          const cost = await measured(source, body, headers);
          const what = `${shape}, ${headerSet}: ${JSON.stringify(cost)}`;
          // 413 would mean the shape never reached the adapter: every shape stays under the source's cap.
          if (cost.status < 400 || cost.status >= 500 || cost.status === 413) over.push(`${what} (status)`);
          if (cost.jsonValues > 2 * MAX_UNVERIFIED_JSON_VALUES + 1) over.push(`${what} (JSON values)`);
          if (cost.formEntries > 4 * MAX_UNVERIFIED_FORM_PARAMS) over.push(`${what} (form entries)`);
          if (cost.macs > MAX_VERIFICATION_STEPS) over.push(`${what} (MACs)`);
        }
      }
      expect(over).toEqual([]);
    });
  }
});
