import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { account, credit, deliverDemo, post, signDemo, waitForStatus } from "../support/deliveries";
import { expectUnchanged, receiptsFor, settle, settleEachTest, shardClaim, snapshot } from "../support/storage";

/**
 * The fixture ledger's verification rows: whatever fails verification (or never gets that far) answers non-2xx,
 * and the whole stored world — every claim shard, every D1 table the pipeline writes — is exactly as before.
 */

const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * As expectRejectedWithNothingWritten, for several requests sent one after another: each answers `status` with
 * `code`, and after all of them one quiet period finds the stored world as it was before the first. A write by any
 * of them shows in that last snapshot, and the file waits out one quiet period instead of one per request.
 */
async function expectEachRejectedWithNothingWritten(
  sends: readonly (() => Promise<Response>)[],
  status: number,
  code: string,
  eventKey?: string,
) {
  await settle();
  const before = await snapshot();
  for (const send of sends) {
    const response = await send();
    expect(response.status).toBe(status);
    expect((await response.json<{ error: { code: string } }>()).error.code).toBe(code);
  }
  await expectUnchanged(before);
  if (eventKey) expect(await shardClaim("demo", eventKey)).toBeNull();
}

async function expectRejectedWithNothingWritten(
  send: () => Promise<Response>,
  status: number,
  code: string,
  eventKey?: string,
) {
  await settle();
  const before = await snapshot();
  const response = await send();
  expect(response.status).toBe(status);
  const answer = await response.json<{ error: { code: string; message: string } }>();
  expect(answer.error.code).toBe(code);
  await expectUnchanged(before);
  if (eventKey) expect(await shardClaim("demo", eventKey)).toBeNull();
  return answer;
}

settleEachTest();

describe("verification over the exact bytes received", () => {
  it("accepts the exact signed bytes, whitespace and key order included", async () => {
    const body = '{ "data": {"amount": 7, "account": "acct_exact"},\n  "type": "account.credited" }';
    const response = await post("/webhooks/demo", body, signDemo("msg_exact_bytes", body));
    expect(response.status).toBe(200);
    expect((await response.json<{ status: string }>()).status).toBe("accepted");
    expect(await waitForStatus("demo", "msg_exact_bytes")).toBe("processed");
    expect((await account("acct_exact"))?.credits).toBe(7);
  });

  it("rejects a body parsed and re-serialized after signing, writing nothing", async () => {
    const signedBody = '{"type": "account.credited", "data": {"account": "acct_reserialized", "amount": 5}}';
    const headers = signDemo("msg_reserialized", signedBody);
    const compact = JSON.stringify(JSON.parse(signedBody));
    const reordered = JSON.stringify({ data: { amount: 5, account: "acct_reserialized" }, type: "account.credited" });
    expect(compact).not.toBe(signedBody);
    await expectEachRejectedWithNothingWritten(
      [compact, reordered, `${signedBody}\n`].map((changed) => () => post("/webhooks/demo", changed, headers)),
      401,
      "signature_invalid",
      "msg_reserialized",
    );
    expect(await account("acct_reserialized")).toBeNull();
  });

  it("rejects a delivery missing any one of the three headers", async () => {
    const body = JSON.stringify(credit("acct_missing", 1));
    const complete = signDemo("msg_missing_header", body);
    for (const dropped of ["webhook-id", "webhook-timestamp", "webhook-signature"] as const) {
      const headers: Record<string, string> = { ...complete };
      delete headers[dropped];
      await expectRejectedWithNothingWritten(
        () => post("/webhooks/demo", body, headers),
        401,
        "signature_invalid",
        "msg_missing_header",
      );
    }
  });

  it("rejects malformed signatures: bad base64, junk entries, a wrong version prefix, a truncated MAC", async () => {
    const body = JSON.stringify(credit("acct_malformed", 1));
    const headers = signDemo("msg_malformed", body);
    const validMac = headers["webhook-signature"].slice("v1,".length);
    const malformed = [
      "v1,!!!not-base64!!!",
      "v1,",
      "junk another-junk",
      "v1",
      `v2,${validMac}`,
      `v1a,${validMac}`,
      `V1,${validMac}`,
      `v1,${validMac.slice(0, 20)}`,
      `v1,${validMac}`.replace(/.$/, "~"),
      Array.from({ length: 17 }, () => `v1,${validMac}`).join(" "),
    ];
    await expectEachRejectedWithNothingWritten(
      malformed.map((signature) => () => post("/webhooks/demo", body, { ...headers, "webhook-signature": signature })),
      401,
      "signature_invalid",
      "msg_malformed",
    );
    await expectEachRejectedWithNothingWritten(
      ["", "12.5", "-1", "1e9", "not-a-time"].map(
        (timestamp) => () => post("/webhooks/demo", body, { ...headers, "webhook-timestamp": timestamp }),
      ),
      401,
      "signature_invalid",
      "msg_malformed",
    );
  });

  it("accepts a valid v1 entry among junk and other versions (the scheme allows several signatures)", async () => {
    const body = JSON.stringify(credit("acct_multi_sig", 3));
    const headers = signDemo("msg_multi_sig", body);
    const signature = `junk v2,AAAA ${headers["webhook-signature"]} v1,${btoa("x".repeat(32))}`;
    const response = await post("/webhooks/demo", body, { ...headers, "webhook-signature": signature });
    expect(response.status).toBe(200);
    expect((await response.json<{ status: string }>()).status).toBe("accepted");
  });

  it("rejects a signature made with another secret, and one over another id or timestamp", async () => {
    const body = JSON.stringify(credit("acct_wrong_secret", 1));
    const otherSecret = `whsec_${btoa("a-different-secret-entirely")}`;
    const wrongSecret = signDemo("msg_wrong_secret", body, nowSeconds(), otherSecret);
    await expectRejectedWithNothingWritten(
      () => post("/webhooks/demo", body, wrongSecret),
      401,
      "signature_invalid",
      "msg_wrong_secret",
    );

    // A valid signature for one id replayed under another id must not pass: the id is part of the signed content.
    const forOtherId = signDemo("msg_signed_for_other", body);
    await expectRejectedWithNothingWritten(
      () => post("/webhooks/demo", body, { ...forOtherId, "webhook-id": "msg_wrong_secret" }),
      401,
      "signature_invalid",
      "msg_wrong_secret",
    );
    const signedAt = nowSeconds();
    const shifted = signDemo("msg_wrong_secret", body, signedAt);
    await expectRejectedWithNothingWritten(
      () => post("/webhooks/demo", body, { ...shifted, "webhook-timestamp": String(signedAt - 1) }),
      401,
      "signature_invalid",
      "msg_wrong_secret",
    );
  });

  it("accepts timestamps just inside the 300 s tolerance, past and future", async () => {
    // One second of slack each way: the Worker reads its own clock a moment after the test signs.
    for (const [eventKey, offset] of [
      ["msg_inside_past", -299],
      ["msg_inside_future", 299],
    ] as const) {
      const response = await deliverDemo(eventKey, credit("acct_tolerance", 1), nowSeconds() + offset);
      expect(response.status, eventKey).toBe(200);
      expect((await response.json<{ status: string }>()).status).toBe("accepted");
    }
    await waitForStatus("demo", "msg_inside_past");
    await waitForStatus("demo", "msg_inside_future");
    expect((await account("acct_tolerance"))?.credits).toBe(2);
  });

  it("rejects timestamps just outside the 300 s tolerance, past and future, writing nothing", async () => {
    for (const [eventKey, offset] of [
      ["msg_outside_past", -302],
      ["msg_outside_future", 302],
    ] as const) {
      await expectRejectedWithNothingWritten(
        () => deliverDemo(eventKey, credit("acct_outside", 1), nowSeconds() + offset),
        401,
        "signature_invalid",
        eventKey,
      );
    }
    expect(await account("acct_outside")).toBeNull();
  });

  it("gives one answer for every failed check, so the caller learns nothing about which part failed", async () => {
    const body = JSON.stringify(credit("acct_one_answer", 1));
    const headers = signDemo("msg_one_answer", body);
    const answers = await Promise.all([
      post("/webhooks/demo", body, { ...headers, "webhook-signature": "v1,AAAA" }),
      post("/webhooks/demo", body, signDemo("msg_one_answer", body, nowSeconds() - 10_000)),
      post("/webhooks/demo", `${body} `, headers),
      post("/webhooks/demo", body, { ...headers, "webhook-id": "" }),
    ]);
    const texts = await Promise.all(answers.map((response) => response.text()));
    expect(new Set(answers.map((response) => response.status))).toEqual(new Set([401]));
    expect(new Set(texts).size).toBe(1);
  });

  it("verifies the same scheme under Svix's svix-* header names, deduplicating across both spellings", async () => {
    const body = JSON.stringify(credit("acct_svix", 4));
    const timestamp = new Date();
    const signature = new Webhook(env.DEMO_WEBHOOK_SECRET).sign("msg_svix_1", timestamp, body);
    const svixHeaders = {
      "svix-id": "msg_svix_1",
      "svix-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
      "svix-signature": signature,
      "content-type": "application/json",
    };
    const first = await post("/webhooks/svix-demo", body, svixHeaders);
    expect(first.status).toBe(200);
    const accepted = await first.json<{ status: string; receipt: string }>();
    expect(accepted.status).toBe("accepted");

    // The same event retried with webhook-* names is the same event.
    const second = await post("/webhooks/svix-demo", body, signDemo("msg_svix_1", body));
    expect(await second.json()).toEqual({ status: "duplicate", receipt: accepted.receipt });

    await expectRejectedWithNothingWritten(
      () => post("/webhooks/svix-demo", body, { ...svixHeaders, "svix-id": "msg_svix_2" }),
      401,
      "signature_invalid",
    );
    expect(await waitForStatus("svix-demo", "msg_svix_1")).toBe("processed");
    expect((await account("acct_svix"))?.credits).toBe(4);
  });
});

describe("requests that never reach verification", () => {
  it("answers 404 for an unknown source and writes nothing", async () => {
    const body = JSON.stringify(credit("acct_unknown_source", 1));
    await expectRejectedWithNothingWritten(
      () => post("/webhooks/no-such-source", body, signDemo("msg_unknown_source", body)),
      404,
      "unknown_source",
    );
  });

  it("answers 413 over the source's cap by declared Content-Length, writing nothing", async () => {
    const body = JSON.stringify({ ...credit("acct_capped", 1), padding: "x".repeat(1100) });
    await expectRejectedWithNothingWritten(
      () => post("/webhooks/capped", body, signDemo("msg_capped_declared", body)),
      413,
      "payload_too_large",
    );
  });

  it("answers 413 over the cap for a chunked body with no Content-Length, writing nothing", async () => {
    const body = JSON.stringify({ ...credit("acct_capped", 1), padding: "x".repeat(1100) });
    const headers = signDemo("msg_capped_chunked", body);
    const bytes = new TextEncoder().encode(body);
    await expectRejectedWithNothingWritten(
      async () => {
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let offset = 0; offset < bytes.length; offset += 100)
              controller.enqueue(bytes.slice(offset, offset + 100));
            controller.close();
          },
        });
        const request = new Request("https://receiver.test/webhooks/capped", { method: "POST", body: stream, headers });
        expect(request.headers.get("content-length")).toBeNull();
        return app.fetch(request, env);
      },
      413,
      "payload_too_large",
    );
  });

  it("accepts a body of exactly the cap, and the default cap is 1 MiB", async () => {
    const base = JSON.stringify({ ...credit("acct_at_cap", 1), padding: "" });
    const body = base.replace('"padding":""', `"padding":"${"x".repeat(1024 - base.length)}"`);
    expect(new TextEncoder().encode(body).length).toBe(1024);
    const response = await post("/webhooks/capped", body, signDemo("msg_at_cap", body));
    expect(response.status).toBe(200);

    const large = JSON.stringify({ ...credit("acct_default_cap", 1), padding: "x".repeat(1024 * 1024) });
    await expectRejectedWithNothingWritten(
      () => post("/webhooks/demo", large, signDemo("msg_default_cap", large)),
      413,
      "payload_too_large",
    );
  });

  it("answers 503 for a source whose table is invalid and accepts nothing for it, while the other sources accept", async () => {
    const body = JSON.stringify(credit("acct_bad_config", 1));
    // Valid in every way but its handler, and signed with its own secret: only the broken table refuses it.
    const brokenSources = {
      ...(env.SOURCES as Record<string, unknown>),
      broken: {
        provider: "standard-webhooks",
        secrets: ["DEMO_WEBHOOK_SECRET"],
        destination: "handler:not-registered",
      },
    };
    const deliver = async (source: string) =>
      await app.fetch(
        new Request(`https://receiver.test/webhooks/${source}`, {
          method: "POST",
          body,
          headers: signDemo("msg_bad_config", body),
        }),
        {
          ...env,
          SOURCES: brokenSources,
        },
      );
    const answer = await expectRejectedWithNothingWritten(() => deliver("broken"), 503, "source_config_invalid");
    // The message names no source, secret or handler: configuration detail is for the operator (logs, admin API).
    expect(answer.error.message).not.toMatch(/not-registered|broken|DEMO_WEBHOOK_SECRET/);
    // Under the same configuration, an unrelated source keeps accepting.
    const response = await deliver("demo");
    expect(response.status).toBe(200);
    expect((await response.json<{ status: string }>()).status).toBe("accepted");
    expect(await waitForStatus("demo", "msg_bad_config")).toBe("processed");
    expect(await receiptsFor("demo", "msg_bad_config")).toHaveLength(1);
  });

  it("answers 503 to every source when SOURCES itself is not a table", async () => {
    const body = JSON.stringify(credit("acct_unreadable_config", 1));
    await expectRejectedWithNothingWritten(
      async () =>
        app.fetch(
          new Request("https://receiver.test/webhooks/demo", {
            method: "POST",
            body,
            headers: signDemo("msg_unreadable_config", body),
          }),
          { ...env, SOURCES: ["not", "a", "table"] },
        ),
      503,
      "source_config_invalid",
      "msg_unreadable_config",
    );
  });

  it("answers 503 for a source whose catch_up table is invalid, before any cron run", async () => {
    const body = JSON.stringify(credit("acct_bad_catch_up", 1));
    const sources = env.SOURCES as Record<string, Record<string, unknown>>;
    const brokenSources = { ...sources, demo: { ...sources.demo, catch_up: { api: "shopify" } } };
    await expectRejectedWithNothingWritten(
      async () =>
        app.fetch(
          new Request("https://receiver.test/webhooks/demo", {
            method: "POST",
            body,
            headers: signDemo("msg_bad_catch_up", body),
          }),
          { ...env, SOURCES: brokenSources },
        ),
      503,
      "source_config_invalid",
      "msg_bad_catch_up",
    );
  });
});
