import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { credit, post, signDemo } from "../support/deliveries";
import { settle, settleEachTest } from "../support/storage";

settleEachTest();

/**
 * The retry storm: 100 events, each delivered twice — half of the second copies re-signed with a fresh timestamp,
 * as a sender's retry would be — shuffled and sent all at once through the real route. Exactly 100 receipts,
 * exactly 100 effects, all processed.
 */
it("turns 200 shuffled concurrent deliveries of 100 events into exactly 100 effects", async () => {
  const nowSeconds = Math.floor(Date.now() / 1000);
  const accounts = Array.from({ length: 7 }, (_, index) => `acct_storm_${index}`);
  const events = Array.from({ length: 100 }, (_, index) => ({
    eventKey: `msg_storm_${index}`,
    accountId: accounts[index % accounts.length]!,
    amount: index + 1,
  }));
  const deliveries = events.flatMap(({ eventKey, accountId, amount }, index) => {
    const body = JSON.stringify(credit(accountId, amount));
    const first = signDemo(eventKey, body, nowSeconds - 60);
    const retry = index % 2 === 0 ? signDemo(eventKey, body, nowSeconds) : first;
    return [
      { body, headers: first },
      { body, headers: retry },
    ];
  });
  // Fisher–Yates with a fixed seed, so a failure can be replayed in the same order.
  let seed = 42;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let index = deliveries.length - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    [deliveries[index], deliveries[other]] = [deliveries[other]!, deliveries[index]!];
  }

  const responses = await Promise.all(deliveries.map(({ body, headers }) => post("/webhooks/demo", body, headers)));
  expect(responses.every((response) => response.status === 200)).toBe(true);
  const answers = await Promise.all(responses.map((response) => response.json<{ status: string; receipt: string }>()));
  expect(answers.filter((answer) => answer.status === "accepted")).toHaveLength(100);
  expect(answers.filter((answer) => answer.status === "duplicate")).toHaveLength(100);
  expect(new Set(answers.map((answer) => answer.receipt)).size).toBe(100);

  await settle(30_000);
  const receipts = await env.DB.prepare(
    `SELECT COUNT(*) AS receipts, SUM(status = 'processed') AS processed, SUM(attempts) AS attempts
     FROM receipts WHERE source = 'demo' AND event_key LIKE 'msg_storm_%'`,
  ).first<{ receipts: number; processed: number; attempts: number }>();
  expect(receipts).toEqual({ receipts: 100, processed: 100, attempts: 100 });
  const guards = await env.DB.prepare(
    "SELECT COUNT(*) AS count FROM receipts WHERE committed_at IS NOT NULL AND source = 'demo' AND event_key LIKE 'msg_storm_%'",
  ).first<{
    count: number;
  }>();
  expect(guards?.count).toBe(100);

  const { results } = await env.DB.prepare(
    `SELECT id, credits FROM accounts WHERE id LIKE 'acct_storm_%' ORDER BY id`,
  ).all<{
    id: string;
    credits: number;
  }>();
  const expected = new Map<string, number>();
  for (const { accountId, amount } of events) expected.set(accountId, (expected.get(accountId) ?? 0) + amount);
  expect(Object.fromEntries(results.map((row) => [row.id, row.credits]))).toEqual(Object.fromEntries(expected));
  expect(results.reduce((sum, row) => sum + row.credits, 0)).toBe(5050);
});
