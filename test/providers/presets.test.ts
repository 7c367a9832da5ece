import { describe, expect, it } from "vitest";
import { presets } from "../../src/providers/presets";
import {
  type AdapterSpec,
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  type SignedRequest,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac, sha256Hex } from "./support/signers";

/**
 * Every sender written as a preset (src/providers/presets.ts), through the real route and the shared contract.
 * None of these senders publishes a signer that runs on its own (their SDKs verify, they do not sign), so each is
 * signed here with node:crypto from the sender's documented recipe — a second implementation, never src/crypto.
 */

const b64 = (buffer: Buffer) => buffer.toString("base64");
const hex = (buffer: Buffer) => buffer.toString("hex");
const url = (source: string) => `https://receiver.test/webhooks/${source}`;
const rfc3339 = (seconds: number) => new Date(seconds * 1000).toISOString();

/** Replaces a header's value with one that cannot decode (or, for tokens, a near miss). */
const swap = (name: string, value: (original: string) => string) => (request: SignedRequest) =>
  withHeader(request, name, value(header(request, name)));

type Case = Omit<AdapterSpec, "sign"> & { sign: AdapterSpec["sign"] };

const cases: Case[] = [
  {
    name: "hubspot",
    sign({ secret, eventKey, timestamp, source }) {
      const body = JSON.stringify([
        {
          eventId: 1,
          subscriptionType: "contact.creation",
          objectId: 123,
          occurredAt: 1_700_000_000_000,
          marker: eventKey,
        },
      ]);
      const ms = String(timestamp * 1000);
      return {
        body,
        headers: {
          "x-hubspot-signature-v3": b64(hmac("sha256", secret, "POST", url(source), body, ms)),
          "x-hubspot-request-timestamp": ms,
          "content-type": "application/json",
        },
      };
    },
    expected: (_args, request) => ({
      eventKey: sha256Hex(request.body as string),
      eventType: "contact.creation",
      subjectId: "123",
      occurredAt: 1_700_000_000_000,
    }),
    signatureHeaders: ["x-hubspot-signature-v3", "x-hubspot-request-timestamp"],
    malformEncoding: swap("x-hubspot-signature-v3", (value) => value.slice(1)),
    junkSignature: swap("x-hubspot-signature-v3", () => "sha256=@@@"),
    timestamped: true,
  },
  {
    name: "zendesk",
    sign({ secret, eventKey, timestamp }) {
      const body = JSON.stringify({
        type: "zen:event-type:ticket.created",
        detail: { id: "35436" },
        time: "2026-11-30T08:00:00Z",
        marker: eventKey,
      });
      const at = rfc3339(timestamp);
      return {
        body,
        headers: {
          "x-zendesk-webhook-signature": b64(hmac("sha256", secret, at, body)),
          "x-zendesk-webhook-signature-timestamp": at,
          "x-zendesk-webhook-invocation-id": eventKey,
          "x-zendesk-webhook-id": "01HZ",
        },
      };
    },
    expected: ({ eventKey }) => ({
      eventKey,
      eventType: "zen:event-type:ticket.created",
      subjectId: "35436",
      kept: { "x-zendesk-webhook-id": "01HZ" },
    }),
    signatureHeaders: ["x-zendesk-webhook-signature", "x-zendesk-webhook-signature-timestamp"],
    malformEncoding: swap("x-zendesk-webhook-signature", (value) => value.slice(1)),
    junkSignature: swap("x-zendesk-webhook-signature", () => "!!!!"),
    timestamped: true,
  },
  {
    name: "woocommerce",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({ id: 727, status: "processing", marker: eventKey });
      return {
        body,
        headers: {
          "x-wc-webhook-signature": b64(hmac("sha256", secret, body)),
          "x-wc-webhook-delivery-id": eventKey,
          "x-wc-webhook-topic": "order.updated",
          "x-wc-webhook-id": "12",
        },
      };
    },
    expected: ({ eventKey }) => ({
      eventKey,
      eventType: "order.updated",
      subjectId: "727",
      kept: { "x-wc-webhook-id": "12" },
    }),
    signatureHeaders: ["x-wc-webhook-signature"],
    malformEncoding: swap("x-wc-webhook-signature", (value) => value.slice(1)),
    junkSignature: swap("x-wc-webhook-signature", () => "====,,"),
    timestamped: false,
  },
  {
    name: "typeform",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({
        event_id: eventKey,
        event_type: "form_response",
        form_response: { token: "tok_1", submitted_at: "2026-11-30T08:00:00Z" },
      });
      return { body, headers: { "typeform-signature": `sha256=${b64(hmac("sha256", secret, body))}` } };
    },
    expected: ({ eventKey }) => ({
      eventKey,
      eventType: "form_response",
      subjectId: "tok_1",
      occurredAt: Date.parse("2026-11-30T08:00:00Z"),
    }),
    signatureHeaders: ["typeform-signature"],
    malformEncoding: swap("typeform-signature", (value) => value.slice(0, -2)),
    junkSignature: swap("typeform-signature", (value) => value.replace("sha256=", "sha1=")),
    timestamped: false,
  },
  {
    name: "calendly",
    sign({ secret, eventKey, timestamp }) {
      const body = JSON.stringify({
        event: "invitee.created",
        created_at: "2026-11-30T08:00:00.000000Z",
        payload: { uri: `https://api.calendly.com/invitees/${eventKey}` },
      });
      return {
        body,
        headers: {
          "calendly-webhook-signature": `t=${timestamp},v1=${hex(hmac("sha256", secret, `${timestamp}.`, body))}`,
        },
      };
    },
    expected: ({ eventKey }, request) => ({
      eventKey: sha256Hex(request.body as string),
      eventType: "invitee.created",
      subjectId: `https://api.calendly.com/invitees/${eventKey}`,
    }),
    signatureHeaders: ["calendly-webhook-signature"],
    malformEncoding: swap("calendly-webhook-signature", (value) => value.slice(0, -1)),
    junkSignature: swap("calendly-webhook-signature", (value) => `${value.split(",")[0]},v0=abc,,v1=zz`),
    timestamped: true,
  },
  {
    name: "vercel",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({
        id: eventKey,
        type: "deployment.succeeded",
        createdAt: 1_700_000_000_000,
        payload: { deployment: { id: "dpl_1" } },
      });
      return { body, headers: { "x-vercel-signature": hex(hmac("sha1", secret, body)) } };
    },
    expected: ({ eventKey }) => ({
      eventKey,
      eventType: "deployment.succeeded",
      subjectId: "dpl_1",
      occurredAt: 1_700_000_000_000,
    }),
    signatureHeaders: ["x-vercel-signature"],
    malformEncoding: swap("x-vercel-signature", (value) => value.slice(1)),
    junkSignature: swap("x-vercel-signature", () => "zz".repeat(20)),
    timestamped: false,
  },
  {
    name: "sentry",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({ action: "created", data: { issue: { id: "1117540176" } }, marker: eventKey });
      return {
        body,
        headers: {
          "sentry-hook-signature": hex(hmac("sha256", secret, body)),
          "request-id": eventKey,
          "sentry-hook-resource": "issue",
          "sentry-hook-timestamp": "1700000000",
        },
      };
    },
    expected: ({ eventKey }) => ({ eventKey, eventType: "issue.created", subjectId: "1117540176" }),
    signatureHeaders: ["sentry-hook-signature"],
    malformEncoding: swap("sentry-hook-signature", (value) => value.slice(1)),
    junkSignature: swap("sentry-hook-signature", () => "sha256=xyz"),
    timestamped: false,
  },
  {
    name: "mux",
    sign({ secret, eventKey, timestamp }) {
      const body = JSON.stringify({
        id: eventKey,
        type: "video.asset.ready",
        object: { id: "asset_1" },
        created_at: "2026-11-30T08:00:00Z",
      });
      return {
        body,
        headers: { "mux-signature": `t=${timestamp},v1=${hex(hmac("sha256", secret, `${timestamp}.`, body))}` },
      };
    },
    expected: ({ eventKey }) => ({ eventKey, eventType: "video.asset.ready", subjectId: "asset_1" }),
    signatureHeaders: ["mux-signature"],
    malformEncoding: swap("mux-signature", (value) => value.slice(0, -1)),
    junkSignature: swap("mux-signature", (value) => `${value.split(",")[0]},v2=ab,,`),
    timestamped: true,
  },
  {
    name: "pagerduty",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({
        event: {
          id: eventKey,
          event_type: "incident.triggered",
          occurred_at: "2026-11-30T08:00:00Z",
          data: { id: "PGR0VU2" },
        },
      });
      return {
        body,
        headers: {
          "x-pagerduty-signature": `v1=${hex(hmac("sha256", "rolled-away", body))},v1=${hex(hmac("sha256", secret, body))}`,
        },
      };
    },
    expected: ({ eventKey }) => ({ eventKey, eventType: "incident.triggered", subjectId: "PGR0VU2" }),
    signatureHeaders: ["x-pagerduty-signature"],
    malformEncoding: swap("x-pagerduty-signature", () => "v1=abc"),
    junkSignature: swap("x-pagerduty-signature", () => "v0=ab,,=,v2=cd"),
    timestamped: false,
  },
  {
    name: "lemonsqueezy",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({ meta: { event_name: "order_created" }, data: { id: "1", marker: eventKey } });
      return { body, headers: { "x-signature": hex(hmac("sha256", secret, body)), "x-event-name": "order_created" } };
    },
    expected: (_args, request) => ({
      eventKey: sha256Hex(request.body as string),
      eventType: "order_created",
      subjectId: "1",
    }),
    signatureHeaders: ["x-signature"],
    malformEncoding: swap("x-signature", (value) => value.slice(1)),
    junkSignature: swap("x-signature", () => "sha256="),
    timestamped: false,
  },
  {
    name: "razorpay",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({
        entity: "event",
        account_id: "acc_BFQ7uQEaa7j2z7",
        event: "payment.captured",
        created_at: 1_700_000_000,
        marker: eventKey,
      });
      return {
        body,
        headers: { "x-razorpay-signature": hex(hmac("sha256", secret, body)), "x-razorpay-event-id": eventKey },
      };
    },
    expected: ({ eventKey }) => ({
      eventKey,
      eventType: "payment.captured",
      subjectId: "acc_BFQ7uQEaa7j2z7",
      occurredAt: 1_700_000_000_000,
    }),
    signatureHeaders: ["x-razorpay-signature"],
    malformEncoding: swap("x-razorpay-signature", (value) => value.slice(1)),
    junkSignature: swap("x-razorpay-signature", () => "g".repeat(64)),
    timestamped: false,
  },
  {
    name: "coinbase-commerce",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({
        id: 1,
        event: { id: eventKey, type: "charge:confirmed", created_at: "2026-11-30T08:00:00Z", data: { id: "chg_1" } },
      });
      return { body, headers: { "x-cc-webhook-signature": hex(hmac("sha256", secret, body)) } };
    },
    expected: ({ eventKey }) => ({ eventKey, eventType: "charge:confirmed", subjectId: "chg_1" }),
    signatureHeaders: ["x-cc-webhook-signature"],
    malformEncoding: swap("x-cc-webhook-signature", (value) => value.slice(1)),
    junkSignature: swap("x-cc-webhook-signature", () => "v1=,"),
    timestamped: false,
  },
  {
    name: "bitbucket",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({ repository: { uuid: "{a1b2}" }, push: { changes: [] }, marker: eventKey });
      return {
        body,
        headers: {
          "x-hub-signature": `sha256=${hex(hmac("sha256", secret, body))}`,
          "x-request-uuid": eventKey,
          "x-event-key": "repo:push",
          "x-attempt-number": "1",
        },
      };
    },
    expected: ({ eventKey }) => ({
      eventKey,
      eventType: "repo:push",
      subjectId: "{a1b2}",
      kept: { "x-attempt-number": "1" },
    }),
    signatureHeaders: ["x-hub-signature"],
    malformEncoding: swap("x-hub-signature", (value) => value.slice(0, -1)),
    junkSignature: swap("x-hub-signature", (value) => value.replace("sha256=", "sha1=")),
    timestamped: false,
  },
  {
    name: "box",
    sign({ secret, eventKey, timestamp }) {
      const body = JSON.stringify({
        type: "webhook_event",
        id: eventKey,
        trigger: "FILE.UPLOADED",
        source: { id: "12345", type: "file" },
        created_at: "2026-11-30T08:00:00-08:00",
      });
      const at = rfc3339(timestamp);
      // Box signs with the primary and the secondary key; here the secondary is a key this source does not list.
      return {
        body,
        headers: {
          "box-signature-primary": b64(hmac("sha256", secret, body, at)),
          "box-signature-secondary": b64(hmac("sha256", "not-listed", body, at)),
          "box-delivery-timestamp": at,
          "box-delivery-id": eventKey,
        },
      };
    },
    expected: ({ eventKey }) => ({ eventKey, eventType: "FILE.UPLOADED", subjectId: "12345" }),
    signatureHeaders: ["box-signature-primary", "box-delivery-timestamp"],
    malformEncoding: swap("box-signature-primary", (value) => value.slice(1)),
    junkSignature: swap("box-signature-primary", () => "@@@@"),
    timestamped: true,
  },
  {
    name: "docusign",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({
        event: "envelope-completed",
        generatedDateTime: "2026-11-30T08:00:00.000Z",
        data: { envelopeId: eventKey },
      });
      return { body, headers: { "x-docusign-signature-1": b64(hmac("sha256", secret, body)) } };
    },
    expected: ({ eventKey }, request) => ({
      eventKey: sha256Hex(request.body as string),
      eventType: "envelope-completed",
      subjectId: eventKey,
    }),
    signatureHeaders: ["x-docusign-signature-1"],
    malformEncoding: swap("x-docusign-signature-1", (value) => value.slice(1)),
    junkSignature: swap("x-docusign-signature-1", () => "%%%%"),
    timestamped: false,
  },
  {
    name: "dropbox",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({ list_folder: { accounts: [`dbid:${eventKey}`] }, delta: { users: [12345678] } });
      return { body, headers: { "x-dropbox-signature": hex(hmac("sha256", secret, body)) } };
    },
    expected: (_args, request) => ({ eventKey: sha256Hex(request.body as string), eventType: null }),
    signatureHeaders: ["x-dropbox-signature"],
    malformEncoding: swap("x-dropbox-signature", (value) => value.slice(1)),
    junkSignature: swap("x-dropbox-signature", () => "sha256=00"),
    timestamped: false,
  },
];

/** Token senders: nothing binds the token to the body, so "one changed byte" is one changed byte of the token. */
const tokenTamper =
  (name: string, asBasic = false) =>
  (request: SignedRequest) => {
    const value = header(request, name);
    if (!asBasic) return withHeader(request, name, value.slice(0, -1) + (value.endsWith("a") ? "b" : "a"));
    const credentials = Buffer.from(value.slice("Basic ".length), "base64").toString();
    return withHeader(
      request,
      name,
      `Basic ${Buffer.from(credentials.slice(0, -1) + (credentials.endsWith("a") ? "b" : "a")).toString("base64")}`,
    );
  };

cases.push(
  {
    name: "telegram",
    sign({ secret, eventKey }) {
      const updateId = Number.parseInt(sha256Hex(eventKey).slice(0, 12), 16);
      return {
        body: JSON.stringify({ update_id: updateId, message: { message_id: 1, text: "hi" } }),
        headers: { "x-telegram-bot-api-secret-token": secret },
      };
    },
    expected: (_args, request) => ({
      eventKey: String(JSON.parse(request.body as string).update_id),
      eventType: "message",
    }),
    signatureHeaders: ["x-telegram-bot-api-secret-token"],
    // A prefix of the right token: a startsWith compare would pass it.
    malformEncoding: swap("x-telegram-bot-api-secret-token", (value) => value.slice(0, -1)),
    junkSignature: swap("x-telegram-bot-api-secret-token", (value) => `${value},junk`),
    timestamped: false,
    tamper: tokenTamper("x-telegram-bot-api-secret-token"),
  },
  {
    name: "postmark",
    sign({ secret, eventKey }) {
      const body = JSON.stringify({ RecordType: "Delivery", MessageID: eventKey, DeliveredAt: "2026-11-30T08:00:00Z" });
      return { body, headers: { authorization: `Basic ${Buffer.from(secret).toString("base64")}` } };
    },
    expected: ({ eventKey }, request) => ({
      eventKey: sha256Hex(request.body as string),
      eventType: "Delivery",
      subjectId: eventKey,
    }),
    signatureHeaders: ["authorization"],
    malformEncoding: swap("authorization", () => "Basic !!!notbase64"),
    junkSignature: swap("authorization", () => `Basic ${Buffer.from("no-colon").toString("base64")}`),
    timestamped: false,
    tamper: tokenTamper("authorization", true),
  },
);

for (const spec of cases) adapterContract(spec);

describe("presets: the table and the docs agree", () => {
  it("every preset has a contract above", () => {
    expect(presets.map((preset) => preset.provider).sort()).toEqual(cases.map((spec) => spec.name).sort());
  });

  it("HubSpot v3 behind a proxy: the signed URI is the source's public_url, not the URL the Worker saw", async () => {
    const secret = secretValue("hubspot", "CURRENT");
    const body = JSON.stringify([{ subscriptionType: "deal.creation", objectId: 5, marker: uniqueKey("hs_proxy") }]);
    const ms = String(nowSeconds() * 1000);
    const signedAt = (signedUrl: string) => ({
      body,
      headers: {
        "x-hubspot-signature-v3": b64(hmac("sha256", secret, "POST", signedUrl, body, ms)),
        "x-hubspot-request-timestamp": ms,
      },
    });
    const receiptId = await expectAccepted(
      "pv-hubspot-proxied",
      signedAt("https://hooks.example.com/crm/hubspot?portal=7"),
    );
    expect((await storedReceipt("pv-hubspot-proxied", receiptId)).eventType).toBe("deal.creation");
  });

  it("HubSpot v3 decodes exactly the listed percent-encodings in the URI before signing (%3A %2F %3F %40 %21 %24 %27 %28 %29 %2A %2C %3B), in either hex case", async () => {
    const secret = secretValue("hubspot", "CURRENT");
    const ms = String(nowSeconds() * 1000);
    // A URL with a query is signed as the source's public_url (pv-hubspot-encoded's is this one): see the next test.
    const called =
      "https://receiver.test/webhooks/pv-hubspot?back=https%3A%2F%2Fcrm.example%2fdeals%3Fid%3D5&who=Jane%20Doe%2C%20%28sales%29%3b%40%21%24%27%2A";
    const decoded =
      "https://receiver.test/webhooks/pv-hubspot?back=https://crm.example/deals?id%3D5&who=Jane%20Doe,%20(sales);@!$'*";
    const signedOver = (signedUrl: string, marker: string) => {
      const body = JSON.stringify([{ subscriptionType: "contact.propertyChange", objectId: 9, marker }]);
      return {
        body,
        headers: {
          "x-hubspot-signature-v3": b64(hmac("sha256", secret, "POST", signedUrl, body, ms)),
          "x-hubspot-request-timestamp": ms,
        },
      };
    };
    await expectAccepted("pv-hubspot-encoded", signedOver(decoded, uniqueKey("hs_decoded")));
    // The URI as received (nothing decoded) and one decoded too far (%3D, %20 are not on the list) are not what HubSpot signs.
    await expectRejectedAndNothingWritten("pv-hubspot-encoded", signedOver(called, uniqueKey("hs_raw")));
    await expectRejectedAndNothingWritten(
      "pv-hubspot-encoded",
      signedOver(decodeURIComponent(called), uniqueKey("hs_over")),
    );
  });

  it("HubSpot v3 called at a URL with a query and no public_url is refused: bytes could move between query and body under one signature", async () => {
    const secret = secretValue("hubspot", "CURRENT");
    const ms = String(nowSeconds() * 1000);
    const body = JSON.stringify([{ subscriptionType: "deal.creation", objectId: 7, marker: uniqueKey("hs_query") }]);
    const signedUrl = `${url("pv-hubspot")}?portal=1`;
    const signature = b64(hmac("sha256", secret, "POST", signedUrl, body, ms));
    const headers = { "x-hubspot-signature-v3": signature, "x-hubspot-request-timestamp": ms };
    // One signature, two deliveries: "…?portal=1" + "[…]" and "…?portal=" + "1[…]" sign the same bytes.
    await expectRejectedAndNothingWritten("pv-hubspot", { url: signedUrl, body, headers });
    await expectRejectedAndNothingWritten("pv-hubspot", {
      url: `${url("pv-hubspot")}?portal=`,
      body: `1${body}`,
      headers,
    });
    await expectRejectedAndNothingWritten("pv-hubspot", {
      url: `${url("pv-hubspot")}?`,
      body: `portal=1${body}`,
      headers,
    });
  });
});
