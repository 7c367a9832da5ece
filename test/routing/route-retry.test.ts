import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { returnExpiredLeases } from "../../src/reconcile/lease-return";
import {
  envWithSources,
  receiptRow,
  seedReceipt,
  standinOrigin,
  standinRequests,
} from "../consumers/support/processing";
import { eventually, post, signDemo } from "../support/deliveries";
import { lossyQueue } from "../support/failpoints";
import { settleEachTest } from "../support/storage";

/**
 * A route's own `retry` table (docs/routing.md, "Fan-out"): each route's deliveries spend that route's retry budget,
 * whether the delivery is the receipt's own or a further one; a route without one spends the source's. Through the
 * real route and queue, to failing stand-ins whose record (per Idempotency-Key `<receipt>:<route>`) counts attempts.
 * Source: routing-retry in test/fixtures/sources/fanout.json.
 */

settleEachTest();

async function deliveryRows(receiptId: string) {
  const { results } = await env.DB.prepare(
    "SELECT route, status, attempts, last_error AS lastError FROM deliveries WHERE receipt_id = ? ORDER BY route",
  )
    .bind(receiptId)
    .all<{ route: string; status: string; attempts: number; lastError: string | null }>();
  return results;
}

const answers = async (receiptId: string, route: string) =>
  (await standinRequests(`${receiptId}:${route}`)).map((request) => request.answer);

describe("routes with retry budgets of their own", { timeout: 60_000 }, () => {
  it("dead-letters each route's delivery after its own number of attempts", async () => {
    const body = JSON.stringify({ type: "account.credited", data: { account: "acct_retry1", amount: 5 } });
    const eventKey = `retry_${crypto.randomUUID()}`;
    const response = await post("/webhooks/routing-retry", body, signDemo(eventKey, body));
    expect(response.status).toBe(200);
    const receiptId = await eventually(
      async () =>
        (
          await env.DB.prepare("SELECT id FROM receipts WHERE source = 'routing-retry' AND event_key = ?")
            .bind(eventKey)
            .first<{ id: string }>()
        )?.id,
    );
    await eventually(
      async () => {
        const receipt = await receiptRow(receiptId);
        const further = await deliveryRows(receiptId);
        return receipt.status === "dead" && further.every((row) => row.status === "dead") && further.length === 2
          ? true
          : undefined;
      },
      45_000,
      "every route dead",
    );
    // brief (the receipt's own delivery): max_retries 1, so 2 attempts. patient: 4, so 5. plain: the source's 2, so 3.
    expect(await receiptRow(receiptId)).toMatchObject({ status: "dead", attempts: 2 });
    expect((await receiptRow(receiptId)).lastError).toMatch(/^gave up after 2 attempts: .*500/);
    expect(await deliveryRows(receiptId)).toEqual([
      { route: "patient", status: "dead", attempts: 5, lastError: expect.stringMatching(/^gave up after 5 attempts/) },
      { route: "plain", status: "dead", attempts: 3, lastError: expect.stringMatching(/^gave up after 3 attempts/) },
    ]);
    expect(await answers(receiptId, "brief")).toEqual([500, 500]);
    expect(await answers(receiptId, "patient")).toEqual([503, 503, 503, 503, 503]);
    expect(await answers(receiptId, "plain")).toEqual([502, 502, 502]);
  });
});

describe("the cron's return of a lease that ran out, on a route with its own retry", () => {
  const routeRetryEnv = envWithSources({
    "retry-lease": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      retry: { max_retries: 5 },
      routes: [{ name: "only", destination: "https://hooks.example.com/x", retry: { max_retries: 1 } }],
    },
  });
  const cron = { ...routeRetryEnv, WORK_QUEUE: lossyQueue() };

  it("judges the abandoned attempt by the route's budget, not the source's", async () => {
    const receiptId = await seedReceipt({ source: "retry-lease", payload: { type: "x" } });
    const leaseTakenAt = Date.now() - LEASE_MS - 1;
    // The second attempt took its lease and its consumer died: spent for a route allowing one retry, not for its source.
    await env.DB.prepare(
      "UPDATE receipts SET status = 'processing', attempts = 2, lease_generation = 2, lease_until = ?, next_attempt_at = ? WHERE id = ?",
    )
      .bind(leaseTakenAt + LEASE_MS, leaseTakenAt, receiptId)
      .run();
    expect(await returnExpiredLeases(cron, Date.now())).toBe(1);
    const row = await receiptRow(receiptId);
    expect(row).toMatchObject({ status: "dead", attempts: 2 });
    expect(row.lastError).toMatch(/^gave up after 2 attempts: lease expired/);
  });
});

describe("a further delivery whose commit fails", () => {
  it("is retried on its route's schedule, not dead-lettered", async () => {
    const commitEnv = envWithSources({
      "retry-commit": {
        provider: "standard-webhooks",
        secrets: ["DEMO_WEBHOOK_SECRET"],
        routes: [
          { name: "own", destination: "none" },
          { name: "commit-fails", destination: `${standinOrigin()}/ok`, retry: { max_retries: 3, jitter: 0 } },
        ],
      },
    });
    const receiptId = await seedReceipt({ source: "retry-commit", payload: { type: "x" }, status: "processed" });
    await env.DB.prepare("UPDATE receipts SET route = 'own', filtered_routes = '' WHERE id = ?").bind(receiptId).run();
    await env.DB.prepare(
      "INSERT INTO deliveries (receipt_id, route, status, attempts, lease_generation, next_attempt_at) VALUES (?, 'commit-fails', 'pending', 1, 1, ?)",
    )
      .bind(receiptId, Date.now() - 1000)
      .run();
    // Its second attempt succeeds, and writing that outcome fails (as D1 might).
    await env.DB.prepare(
      `CREATE TRIGGER failpoint_commit_fails BEFORE UPDATE OF status ON deliveries
       WHEN NEW.status = 'processed' AND NEW.route = 'commit-fails'
       BEGIN SELECT RAISE(ABORT, 'injected failure before commit'); END`,
    ).run();
    try {
      const verdicts = await processDeliveries(commitEnv, "commit-fails", [receiptId]);
      expect(verdicts.get(receiptId)).toMatchObject({ kind: "retry" });
    } finally {
      await env.DB.prepare("DROP TRIGGER IF EXISTS failpoint_commit_fails").run();
    }
    const row = await env.DB.prepare(
      "SELECT status, attempts, next_attempt_at AS nextAttemptAt, last_error AS lastError FROM deliveries WHERE receipt_id = ?",
    )
      .bind(receiptId)
      .first<{ status: string; attempts: number; nextAttemptAt: number | null; lastError: string }>();
    expect(row).toMatchObject({ status: "pending", attempts: 2, nextAttemptAt: expect.any(Number) });
    expect(row?.lastError).toMatch(/^commit failed: .*injected failure before commit/);
  });
});
