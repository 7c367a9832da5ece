import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { attemptRows, envWithSources, receiptRow, seedReceipt, standinRequests } from "../consumers/support/processing";
import { account, eventually, post, signDemo, waitForStatus } from "../support/deliveries";

/**
 * A source's route through the real pipeline: signed deliveries posted to /webhooks/<source>, relayed, consumed
 * from the queue, and forwarded to the Node stand-in (test/setup/global/forward-standin.ts), whose record of what
 * arrived is the evidence. Sources: test/fixtures/sources/routing.json.
 */

async function deliver(source: string, eventKey: string, body: string): Promise<string> {
  const response = await post(`/webhooks/${source}`, body, signDemo(eventKey, body));
  expect(response.status).toBe(200);
  await waitForStatus(source, eventKey, ["processed", "skipped", "dead"]);
  const row = await env.DB.prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
    .bind(source, eventKey)
    .first<{ id: string }>();
  return row!.id;
}

const credit = (account: string, amount: number, type = "account.credited") =>
  JSON.stringify({ type, data: { account, amount } });

describe("a route with a filter, a schema and a transform", () => {
  it("forwards the transformed body, signed over what is sent, and stores the original bytes", async () => {
    const key = `rt_${crypto.randomUUID()}`;
    const original = credit("acct_rt1", 250);
    const receiptId = await deliver("routing-slack", key, original);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", lastError: null });
    const [sent, ...more] = await standinRequests(receiptId);
    expect(more).toEqual([]);
    expect(sent!.body).toBe('{"text":"Account acct_rt1 credited 250"}');
    expect(sent!.headers["content-type"]).toBe("application/json");
    expect(sent!.headers["x-account"]).toBe("acct_rt1");
    expect(() => new Webhook(env.GATEWAY_SIGNING_SECRET).verify(sent!.body, sent!.headers)).not.toThrow();
    const stored = await env.DB.prepare("SELECT body FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first<{ body: number[] }>();
    expect(new TextDecoder().decode(new Uint8Array(stored!.body))).toBe(original);
  });

  it("ends a filtered-out event skipped, with nothing sent and no attempt row written", async () => {
    const small = await deliver("routing-slack", `rt_${crypto.randomUUID()}`, credit("acct_rt2", 50));
    const otherType = await deliver(
      "routing-slack",
      `rt_${crypto.randomUUID()}`,
      credit("acct_rt2", 500, "account.closed"),
    );
    for (const receiptId of [small, otherType]) {
      expect(await receiptRow(receiptId)).toMatchObject({
        status: "skipped",
        lastError: "filtered out by route slack",
        attempts: 1,
      });
      expect(await standinRequests(receiptId)).toEqual([]);
      const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM attempts WHERE receipt_id = ?")
        .bind(receiptId)
        .first<{ n: number }>();
      expect(rows!.n).toBe(0);
    }
  });

  it("dead-letters a body that fails the schema with the validation errors, before anything is sent", async () => {
    const receiptId = await deliver("routing-slack", `rt_${crypto.randomUUID()}`, credit("acct_rt3", 150.5));
    const row = await receiptRow(receiptId);
    expect(row.status).toBe("dead");
    expect(row.lastError).toMatch(/^schema mismatch on route slack: #\/data\/amount: .*integer/);
    expect(await standinRequests(receiptId)).toEqual([]);
  });
});

describe("a route without rules", () => {
  it("forwards the original bytes exactly, as a source's own destination always has", async () => {
    const original = '{ "type":"account.credited",   "data": {"account":"acct_rt4","amount":1} }\n';
    const receiptId = await deliver("routing-plain", `rt_${crypto.randomUUID()}`, original);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed" });
    const [sent] = await standinRequests(receiptId);
    expect(sent!.body).toBe(original);
    expect(sent!.headers["x-account"]).toBeUndefined();
  });
});

describe("a route to a handler", () => {
  it("hands the handler the transform's output as its payload", async () => {
    const accountId = `acct_${crypto.randomUUID().slice(0, 8)}`;
    const receiptId = await deliver(
      "routing-handler",
      `rt_${crypto.randomUUID()}`,
      JSON.stringify({ kind: "account.credited", acct: accountId, cents: 7 }),
    );
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed" });
    expect(await account(accountId)).toMatchObject({ credits: 7 });
  });
});

describe("a route whose config is wrong for an event", () => {
  const slack = (env.SOURCES as Record<string, Record<string, unknown>>)["routing-slack"]!;
  const route = (slack.routes as Record<string, unknown>[])[0]!;
  const misconfigured = (change: Record<string, unknown>) =>
    envWithSources({ "routing-slack": { ...slack, routes: [{ ...route, ...change }] } });

  it("dead-letters a failing transform or a mismatched schema, and a replay after the fix delivers it", async () => {
    const badTransform = await seedReceipt({
      source: "routing-slack",
      payload: { type: "account.credited", data: { account: "acct_rt5", amount: 300 } },
      eventType: "account.credited",
    });
    expect(
      await processReceipt(misconfigured({ transform: '{ "text": $number(data.account) }' }), badTransform),
    ).toEqual({ kind: "done", status: "dead" });
    expect((await receiptRow(badTransform)).lastError).toMatch(/^transform failed: .*acct_rt5/);

    const badSchema = await seedReceipt({
      source: "routing-slack",
      payload: { type: "account.credited", data: { account: "acct_rt6", amount: 300 } },
      eventType: "account.credited",
    });
    expect(
      await processReceipt(misconfigured({ schema: { type: "object", required: ["currency"] } }), badSchema),
    ).toEqual({ kind: "done", status: "dead" });
    expect((await receiptRow(badSchema)).lastError).toMatch(/^schema mismatch on route slack: #: .*currency/);
    expect(await attemptRows(badSchema)).toMatchObject([{ outcome: "dead" }]);

    // The deployed config (the fixture) is the fixed one: a replay goes through the real queue consumer.
    for (const receiptId of [badTransform, badSchema]) {
      expect(await standinRequests(receiptId)).toEqual([]);
      expect(await replayReceipt(env, receiptId)).toMatchObject({ kind: "replayed" });
    }
    await eventually(async () =>
      (await receiptRow(badTransform)).status === "processed" && (await receiptRow(badSchema)).status === "processed"
        ? true
        : undefined,
    );
    expect((await standinRequests(badTransform)).map((request) => request.body)).toEqual([
      '{"text":"Account acct_rt5 credited 300"}',
    ]);
    expect((await standinRequests(badSchema)).map((request) => request.body)).toEqual([
      '{"text":"Account acct_rt6 credited 300"}',
    ]);
  });
});
