import { env, exports } from "cloudflare:workers";
import { hmacValidator as AdyenHmacValidator } from "@adyen/api-library";
import { SignJWT } from "jose";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  type SignedRequest,
  secretValue,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac, sha256Hex } from "./support/signers";

/**
 * Senders with a handshake or an answer of their own, through the real route: a challenge is echoed only once its
 * proof checked out, and an unproven one is the one 401, writing nothing (no claim, no receipt, no kept secret).
 */

const verifyTokenOf = (source: string) =>
  (env as unknown as Record<string, string>)[
    `PV_${source.replace(/^pv-/, "").replace(/-/g, "_").toUpperCase()}_VERIFY_TOKEN`
  ]!;

function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return exports.default.fetch(new Request(`https://receiver.test${path}`, { method: "GET", headers }));
}

async function keptSecretCount(source: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS count FROM handshake_secrets WHERE source = ?")
    .bind(source)
    .first<{ count: number }>();
  return row!.count;
}

async function expectUnprovenAndNothingWritten(source: string, response: Promise<Response>) {
  const before = { ...(await storedCounts(source)), kept: await keptSecretCount(source) };
  const answer = await response;
  expect(answer.status).toBe(401);
  expect(await answer.json()).toEqual({
    error: { code: "signature_invalid", message: "The delivery's signature could not be verified." },
  });
  expect({ ...(await storedCounts(source)), kept: await keptSecretCount(source) }).toEqual(before);
}

const metaBody = (marker: string) =>
  JSON.stringify({
    object: "whatsapp_business_account",
    entry: [{ id: "1029", time: 1_700_000_000, changes: [{ field: "messages", value: { marker } }] }],
  });
// Instagram's changes (object `instagram`) and Messenger's messaging events (object `page`), as each product sends them.
const instagramBody = (marker: string) =>
  JSON.stringify({
    object: "instagram",
    entry: [{ id: "1029", time: 1_700_000_000, changes: [{ field: "comments", value: { id: marker, text: "hi" } }] }],
  });
const messengerBody = (marker: string) =>
  JSON.stringify({
    object: "page",
    entry: [
      {
        id: "1029",
        time: 1_700_000_000,
        messaging: [{ sender: { id: "5001" }, recipient: { id: "1029" }, message: { mid: marker } }],
      },
    ],
  });

const metaProducts = [
  { name: "meta", body: metaBody, eventType: "whatsapp_business_account.messages" },
  { name: "whatsapp", body: metaBody, eventType: "whatsapp_business_account.messages" },
  { name: "instagram", body: instagramBody, eventType: "instagram.comments" },
  { name: "messenger", body: messengerBody, eventType: "page.messaging" },
];

for (const { name, body: bodyOf, eventType } of metaProducts) {
  adapterContract({
    name,
    sign: ({ secret, eventKey }) => {
      const body = bodyOf(eventKey);
      return {
        body,
        headers: {
          "x-hub-signature-256": `sha256=${hmac("sha256", secret, body).toString("hex")}`,
          "content-type": "application/json",
        },
      };
    },
    expected: (_args, request) => ({ eventKey: sha256Hex(request.body as string), eventType, subjectId: "1029" }),
    signatureHeaders: ["x-hub-signature-256"],
    malformEncoding: (request) => withHeader(request, "x-hub-signature-256", "sha256=abc"),
    junkSignature: (request) => withHeader(request, "x-hub-signature-256", "sha1=zz"),
    timestamped: false,
  });
}

describe("meta: GET hub.challenge", () => {
  it("echoes the challenge when hub.verify_token is the source's verify token", async () => {
    const challenge = uniqueKey("1158201444");
    const response = await get(
      `/webhooks/pv-meta?hub.mode=subscribe&hub.challenge=${challenge}&hub.verify_token=${verifyTokenOf("pv-meta")}`,
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await response.text()).toBe(challenge);
  });

  it("a wrong, missing or test-source verify token is a 401 that echoes nothing and writes nothing", async () => {
    await expectUnprovenAndNothingWritten(
      "pv-meta",
      get(`/webhooks/pv-meta?hub.mode=subscribe&hub.challenge=echo-me&hub.verify_token=wrong`),
    );
    await expectUnprovenAndNothingWritten("pv-meta", get(`/webhooks/pv-meta?hub.mode=subscribe&hub.challenge=echo-me`));
    await expectUnprovenAndNothingWritten(
      "pv-meta",
      get(`/webhooks/pv-meta?hub.mode=subscribe&hub.challenge=echo-me&hub.verify_token=${verifyTokenOf("pv-meta")}x`),
    );
    await expectUnprovenAndNothingWritten(
      "pv-meta",
      get(`/webhooks/pv-meta?hub.mode=unsubscribe&hub.challenge=echo-me&hub.verify_token=${verifyTokenOf("pv-meta")}`),
    );
  });

  it("each Meta product by name (instagram, messenger) answers its own verify token, and only its own", async () => {
    for (const name of ["instagram", "messenger"]) {
      const challenge = uniqueKey("challenge");
      const response = await get(
        `/webhooks/pv-${name}?hub.mode=subscribe&hub.challenge=${challenge}&hub.verify_token=${verifyTokenOf(`pv-${name}`)}`,
      );
      expect(await response.text()).toBe(challenge);
      await expectUnprovenAndNothingWritten(
        `pv-${name}`,
        get(
          `/webhooks/pv-${name}?hub.mode=subscribe&hub.challenge=${challenge}&hub.verify_token=${verifyTokenOf("pv-meta")}`,
        ),
      );
    }
  });

  it("a verify_token whose Worker secret is not set is a 503 (a deploy mistake the sender retries), never a 401 or an echo", async () => {
    const before = await storedCounts("pv-meta-token-unset");
    for (const request of [
      get(`/webhooks/pv-meta-token-unset?hub.mode=subscribe&hub.challenge=echo-me&hub.verify_token=anything`),
      get(`/webhooks/pv-dropbox-token-unset?challenge=echo-me&verify_token=anything`),
      get(`/webhooks/pv-dropbox-token-unset?challenge=echo-me`),
    ]) {
      const answer = await request;
      expect(answer.status).toBe(503);
      expect(await answer.json()).toEqual({
        error: { code: "source_secret_missing", message: "This source's verify token is not configured yet." },
      });
    }
    expect(await storedCounts("pv-meta-token-unset")).toEqual(before);
  });

  it("GET to a source whose sender has no GET handshake, or another method, is a 405 with Allow", async () => {
    const onGithub = await get("/webhooks/pv-github");
    expect(onGithub.status).toBe(405);
    expect(onGithub.headers.get("allow")).toBe("POST");
    const put = await exports.default.fetch(
      new Request("https://receiver.test/webhooks/pv-meta", { method: "PUT", body: "{}" }),
    );
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, POST");
    expect((await get("/webhooks/no-such-source")).status).toBe(404);
  });
});

describe("dropbox: GET challenge", () => {
  it("echoes the challenge (text, nosniff) only with the URL's verify_token", async () => {
    const challenge = uniqueKey("dbx");
    const response = await get(
      `/webhooks/pv-dropbox?challenge=${challenge}&verify_token=${verifyTokenOf("pv-dropbox")}`,
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await response.text()).toBe(challenge);
    await expectUnprovenAndNothingWritten("pv-dropbox", get(`/webhooks/pv-dropbox?challenge=${challenge}`));
    await expectUnprovenAndNothingWritten(
      "pv-dropbox",
      get(`/webhooks/pv-dropbox?challenge=${challenge}&verify_token=nope`),
    );
  });
});

const tokenTamper = (name: string) => (request: SignedRequest) => {
  const value = header(request, name);
  return withHeader(request, name, value.slice(0, -1) + (value.endsWith("a") ? "b" : "a"));
};

adapterContract({
  name: "okta",
  sign: ({ secret, eventKey }) => ({
    body: JSON.stringify({
      eventId: eventKey,
      eventTime: "2026-11-30T08:00:00.000Z",
      data: { events: [{ eventType: "user.session.start", target: [{ id: "00u1" }] }] },
    }),
    headers: { authorization: secret, "content-type": "application/json" },
  }),
  expected: ({ eventKey }) => ({ eventKey, eventType: "user.session.start", subjectId: "00u1" }),
  signatureHeaders: ["authorization"],
  malformEncoding: (request) => withHeader(request, "authorization", header(request, "authorization").slice(0, -1)),
  junkSignature: (request) => withHeader(request, "authorization", `${header(request, "authorization")},junk`),
  timestamped: false,
  tamper: tokenTamper("authorization"),
});

describe("okta: GET X-Okta-Verification-Challenge", () => {
  it("answers {verification} only when the hook's authentication header checks out", async () => {
    const challenge = uniqueKey("okta");
    const response = await get("/webhooks/pv-okta", {
      "x-okta-verification-challenge": challenge,
      authorization: secretValue("okta", "CURRENT"),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ verification: challenge });
    await expectUnprovenAndNothingWritten(
      "pv-okta",
      get("/webhooks/pv-okta", { "x-okta-verification-challenge": challenge }),
    );
    await expectUnprovenAndNothingWritten(
      "pv-okta",
      get("/webhooks/pv-okta", {
        "x-okta-verification-challenge": challenge,
        authorization: secretValue("okta", "UNLISTED"),
      }),
    );
  });
});

describe("microsoft-graph: validationToken and clientState", () => {
  const notification = (clientStates: string[], marker: string) =>
    JSON.stringify({
      value: clientStates.map((clientState) => ({
        subscriptionId: "sub-1",
        clientState,
        changeType: "created",
        resource: `Users/${marker}`,
        tenantId: "t",
      })),
    });

  it("echoes validationToken (text/plain) only with the URL's verify_token", async () => {
    const validationToken = uniqueKey("Validation: Testing client application reachability");
    const path = `/webhooks/pv-microsoft-graph?verify_token=${verifyTokenOf("pv-microsoft-graph")}&validationToken=${encodeURIComponent(validationToken)}`;
    const response = await exports.default.fetch(new Request(`https://receiver.test${path}`, { method: "POST" }));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await response.text()).toBe(validationToken);
    await expectUnprovenAndNothingWritten(
      "pv-microsoft-graph",
      exports.default.fetch(
        new Request(`https://receiver.test/webhooks/pv-microsoft-graph?validationToken=echo-me`, { method: "POST" }),
      ),
    );
  });

  it("accepts notifications whose every clientState is a listed secret, answering 202", async () => {
    const marker = uniqueKey("graph");
    const body = notification(
      [secretValue("microsoft-graph", "CURRENT"), secretValue("microsoft-graph", "CURRENT")],
      marker,
    );
    const response = await send("pv-microsoft-graph", { body, headers: { "content-type": "application/json" } });
    expect(response.status).toBe(202);
    const receipt = await storedReceipt("pv-microsoft-graph", response.headers.get("x-webhook-receipt")!);
    // The key is the hash of what is kept: the body with its clientState (the secret) redacted (graph-redaction.test.ts).
    const kept = JSON.stringify(JSON.parse(body, (name, value) => (name === "clientState" ? "[redacted]" : value)));
    expect(receipt).toMatchObject({ eventKey: sha256Hex(kept), eventType: "created", subjectId: `Users/${marker}` });
    expect((await send("pv-microsoft-graph", { body, headers: {} })).headers.get("x-webhook-disposition")).toBe(
      "duplicate",
    );
  });

  it("a wrong, expired, unlisted or mixed clientState is refused and writes nothing", async () => {
    for (const states of [
      ["wrong"],
      [secretValue("microsoft-graph", "EXPIRED")],
      [secretValue("microsoft-graph", "CURRENT"), "forged"],
      [],
    ]) {
      await expectRejectedAndNothingWritten("pv-microsoft-graph", {
        body: notification(states, uniqueKey("graph_bad")),
        headers: {},
      });
    }
    await expectRejectedAndNothingWritten("pv-microsoft-graph", { body: "not json", headers: {} });
  });
});

describe("asana: X-Hook-Secret kept, then X-Hook-Signature", () => {
  const source = "pv-asana";
  const handshakeUrl = (verifyToken: string) => `https://receiver.test/webhooks/${source}?verify_token=${verifyToken}`;
  const events = (marker: string) =>
    JSON.stringify({
      events: [
        { action: "changed", resource: { gid: marker, resource_type: "task" }, created_at: "2026-11-30T08:00:00.000Z" },
      ],
    });

  it("a proven handshake echoes X-Hook-Secret and keeps it; deliveries signed with it are accepted", async () => {
    const hookSecret = uniqueKey("asana_secret");
    const response = await send(source, {
      url: handshakeUrl(verifyTokenOf(source)),
      body: "",
      headers: { "x-hook-secret": hookSecret },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-hook-secret")).toBe(hookSecret);
    const body = events(uniqueKey("task"));
    const receiptId = await expectAccepted(source, {
      url: handshakeUrl(verifyTokenOf(source)),
      body,
      headers: { "x-hook-signature": hmac("sha256", hookSecret, body).toString("hex") },
    });
    expect(await storedReceipt(source, receiptId)).toMatchObject({
      eventKey: sha256Hex(body),
      eventType: "task.changed",
    });
    // The listed verify token is proof for the handshake only: it never verifies a delivery.
    await expectRejectedAndNothingWritten(source, {
      body,
      headers: { "x-hook-signature": hmac("sha256", verifyTokenOf(source), body).toString("hex") },
    });
    await expectRejectedAndNothingWritten(source, {
      body: body.replace("changed", "chenged"),
      headers: { "x-hook-signature": hmac("sha256", hookSecret, body).toString("hex") },
    });
    await expectRejectedAndNothingWritten(source, { body, headers: {} });
  });

  it("an unproven handshake is a 401: the secret is neither echoed nor kept", async () => {
    await expectUnprovenAndNothingWritten(
      source,
      send(source, { url: handshakeUrl("wrong"), body: "", headers: { "x-hook-secret": "attacker" } }),
    );
    await expectUnprovenAndNothingWritten(source, send(source, { body: "", headers: { "x-hook-secret": "attacker" } }));
    // A delivery signed with the refused secret verifies nothing.
    const body = events("t");
    await expectRejectedAndNothingWritten(source, {
      body,
      headers: { "x-hook-signature": hmac("sha256", "attacker", body).toString("hex") },
    });
  });
});

describe("notion: verification_token kept, then X-Notion-Signature", () => {
  const source = "pv-notion";
  it("keeps a proven verification_token (readable in D1) and verifies deliveries with it; an unproven one is a 401", async () => {
    const verificationToken = `secret_${uniqueKey("notion")}`;
    await expectUnprovenAndNothingWritten(
      source,
      send(source, { body: JSON.stringify({ verification_token: verificationToken }), headers: {} }),
    );
    const response = await send(source, {
      url: `https://receiver.test/webhooks/${source}?verify_token=${verifyTokenOf(source)}`,
      body: JSON.stringify({ verification_token: verificationToken }),
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(200);
    const kept = await env.DB.prepare("SELECT secret FROM handshake_secrets WHERE source = ? AND secret = ?")
      .bind(source, verificationToken)
      .first();
    expect(kept).toEqual({ secret: verificationToken });
    const eventId = uniqueKey("ntn");
    const body = JSON.stringify({
      id: eventId,
      type: "page.created",
      timestamp: "2026-11-30T08:00:00.000Z",
      entity: { id: "pg_1", type: "page" },
    });
    const receiptId = await expectAccepted(source, {
      body,
      headers: { "x-notion-signature": `sha256=${hmac("sha256", verificationToken, body).toString("hex")}` },
    });
    expect(await storedReceipt(source, receiptId)).toMatchObject({
      eventKey: eventId,
      eventType: "page.created",
      subjectId: "pg_1",
    });
    await expectRejectedAndNothingWritten(source, {
      body,
      headers: { "x-notion-signature": `sha256=${hmac("sha256", "other", body).toString("hex")}` },
    });
  });
});

// monday.com and Netlify: the jose library signs the HS256 JWTs.
const jwt = (secret: string, claims: Record<string, unknown>, expiresIn = "5m") =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));

adapterContract({
  name: "monday",
  async sign({ secret, eventKey }) {
    const body = JSON.stringify({
      event: {
        type: "create_pulse",
        triggerUuid: eventKey,
        pulseId: 9571351437,
        triggerTime: "2026-11-30T08:00:00.000Z",
      },
    });
    return {
      body,
      // Per-request claims, as monday.com's own tokens carry: each token is honoured for one body only.
      headers: {
        authorization: await jwt(secret, { dat: { client_id: "c" }, shortLivedToken: eventKey }),
        "content-type": "application/json",
      },
    };
  },
  expected: ({ eventKey }) => ({ eventKey, eventType: "create_pulse", subjectId: "9571351437" }),
  signatureHeaders: ["authorization"],
  malformEncoding: (request) => withHeader(request, "authorization", `${header(request, "authorization")}$`),
  junkSignature: (request) => withHeader(request, "authorization", "Bearer a.b"),
  timestamped: false,
  // The JWT does not cover the body; one changed byte of the token must fail.
  tamper: (request) => {
    const value = header(request, "authorization");
    return withHeader(request, "authorization", value.slice(0, -2) + (value.at(-2) === "A" ? "B" : "A") + value.at(-1));
  },
});

describe("monday: challenge", () => {
  it("echoes {challenge} proven by a JWT or by the URL's verify_token; otherwise a 401", async () => {
    const body = JSON.stringify({ challenge: uniqueKey("mnd") });
    const byJwt = await send("pv-monday", {
      body,
      headers: { authorization: await jwt(secretValue("monday", "CURRENT"), {}) },
    });
    expect(await byJwt.json()).toEqual(JSON.parse(body));
    const byToken = await send("pv-monday", {
      url: `https://receiver.test/webhooks/pv-monday?verify_token=${verifyTokenOf("pv-monday")}`,
      body,
      headers: {},
    });
    expect(await byToken.json()).toEqual(JSON.parse(body));
    await expectUnprovenAndNothingWritten("pv-monday", send("pv-monday", { body, headers: {} }));
    await expectUnprovenAndNothingWritten(
      "pv-monday",
      send("pv-monday", { body, headers: { authorization: await jwt(secretValue("monday", "UNLISTED"), {}) } }),
    );
  });

  it("an expired JWT, or one that is not HS256, is refused", async () => {
    const body = JSON.stringify({ event: { type: "create_pulse", triggerUuid: uniqueKey("mnd_exp") } });
    const expired = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime(nowSeconds() - 60)
      .sign(new TextEncoder().encode(secretValue("monday", "CURRENT")));
    await expectRejectedAndNothingWritten("pv-monday", { body, headers: { authorization: expired } });
    const none = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from("{}").toString("base64url")}.`;
    await expectRejectedAndNothingWritten("pv-monday", { body, headers: { authorization: none } });
  });
});

adapterContract({
  name: "netlify",
  async sign({ secret, eventKey }) {
    const body = JSON.stringify({ id: eventKey, state: "ready", updated_at: "2026-11-30T08:00:00.000Z" });
    return {
      body,
      headers: {
        "x-webhook-signature": await jwt(secret, { iss: "netlify", sha256: sha256Hex(body) }),
        "x-netlify-event": "deploy_created",
      },
    };
  },
  expected: ({ eventKey }, request) => ({
    eventKey: sha256Hex(request.body as string),
    eventType: "deploy_created",
    subjectId: eventKey,
  }),
  signatureHeaders: ["x-webhook-signature"],
  malformEncoding: (request) =>
    withHeader(request, "x-webhook-signature", `${header(request, "x-webhook-signature")}!`),
  junkSignature: (request) => withHeader(request, "x-webhook-signature", "a.b.c"),
  timestamped: false,
});

// Adyen: the Adyen Node library's HmacValidator computes each item's signature.
const adyenItem = (key: string, pspReference: string, eventCode = "AUTHORISATION") => {
  const item = {
    pspReference,
    originalReference: "",
    merchantAccountCode: "YOUR_MERCHANT_ACCOUNT",
    merchantReference: "order-7",
    amount: { value: 1130, currency: "EUR" },
    eventCode,
    success: "true",
    eventDate: "2026-11-30T08:00:00+01:00",
    additionalData: {} as Record<string, string>,
  };
  item.additionalData.hmacSignature = new AdyenHmacValidator().calculateHmac(item as never, key);
  return item;
};
const adyenBody = (...items: unknown[]) =>
  JSON.stringify({ live: "false", notificationItems: items.map((item) => ({ NotificationRequestItem: item })) });

adapterContract({
  name: "adyen",
  sign: ({ secret, eventKey }) => ({
    body: adyenBody(adyenItem(secret, eventKey)),
    headers: { "content-type": "application/json" },
  }),
  expected: ({ eventKey }) => ({
    eventKey: `${eventKey}:AUTHORISATION:true`,
    eventType: "AUTHORISATION",
    subjectId: eventKey,
  }),
  signatureHeaders: [],
  malformEncoding: (request) => ({
    ...request,
    body: (request.body as string).replace(/"hmacSignature":"[^"]*"/, '"hmacSignature":"!!notbase64"'),
  }),
  junkSignature: (request) => ({
    ...request,
    body: (request.body as string).replace(/"hmacSignature":"[^"]*"/, '"hmacSignature":""'),
  }),
  timestamped: false,
  tamper: (request) => ({ ...request, body: (request.body as string).replace('"value":1130', '"value":1131') }),
});

describe("adyen: [accepted] and batches", () => {
  it("answers [accepted] as text, and a retried batch of two items is two events, each keyed by its own item", async () => {
    const key = secretValue("adyen", "CURRENT");
    const [first, second] = [uniqueKey("psp_a"), uniqueKey("psp_b")];
    const body = adyenBody(adyenItem(key, first), adyenItem(key, second, "CAPTURE"));
    const response = await send("pv-adyen", { body, headers: {} });
    expect(await response.text()).toBe("[accepted]");
    expect(response.headers.get("x-webhook-disposition")).toBe("accepted, accepted");
    const retry = await send("pv-adyen", { body, headers: {} });
    expect(await retry.text()).toBe("[accepted]");
    expect(retry.headers.get("x-webhook-disposition")).toBe("duplicate, duplicate");
    const receipts = response.headers.get("x-webhook-receipt")!.split(", ");
    expect(retry.headers.get("x-webhook-receipt")).toBe(receipts.join(", "));
    expect((await storedReceipt("pv-adyen", receipts[0]!)).eventKey).toBe(`${first}:AUTHORISATION:true`);
    expect((await storedReceipt("pv-adyen", receipts[1]!)).eventKey).toBe(`${second}:CAPTURE:true`);
  });

  it("one forged item beside a genuine one refuses the whole batch", async () => {
    const key = secretValue("adyen", "CURRENT");
    const forged = adyenItem(secretValue("adyen", "UNLISTED"), uniqueKey("psp_forged"));
    await expectRejectedAndNothingWritten("pv-adyen", {
      body: adyenBody(adyenItem(key, uniqueKey("psp_ok")), forged),
      headers: {},
    });
  });
});

// Standard Webhooks senders by name: Clerk and Resend deliver through Svix (the svix library signs, svix-* headers);
// Brex and OpenAI send webhook-* headers (the standardwebhooks library signs).
for (const name of ["clerk", "resend", "brex", "openai"]) {
  const viaSvix = name === "clerk" || name === "resend";
  adapterContract({
    name,
    sign({ secret, eventKey, timestamp }) {
      const body = JSON.stringify({ type: "user.created", data: { id: "user_29w83sxmDNGwOuEthce5gg56FcC" } });
      const signature = viaSvix
        ? new SvixWebhook(secret).sign(eventKey, new Date(timestamp * 1000), body)
        : new StandardWebhook(secret).sign(eventKey, new Date(timestamp * 1000), body);
      const prefix = viaSvix ? "svix" : "webhook";
      return {
        body,
        headers: {
          [`${prefix}-id`]: eventKey,
          [`${prefix}-timestamp`]: String(timestamp),
          [`${prefix}-signature`]: signature,
        },
      };
    },
    expected: ({ eventKey }) => ({ eventKey, eventType: "user.created" }),
    signatureHeaders: viaSvix
      ? ["svix-signature", "svix-id", "svix-timestamp"]
      : ["webhook-signature", "webhook-id", "webhook-timestamp"],
    malformEncoding: (request) => withHeader(request, viaSvix ? "svix-signature" : "webhook-signature", "v1,abc"),
    junkSignature: (request) =>
      withHeader(request, viaSvix ? "svix-signature" : "webhook-signature", "v2,abc ,, v1a,@@"),
    timestamped: true,
  });
}
