import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { difference, meterReading } from "../../src/lib/meter";
import { OVERDUE_GRACE_MS } from "../../src/reconcile/redrive";
import { reenqueueLostDeliveries } from "../../src/reconcile/redrive-deliveries";
import { ADMIN, adminGet } from "../admin/support";
import { envWithSources, receiptRow, seedReceipt, standinRequests } from "../consumers/support/processing";
import { account, eventually, post, signDemo } from "../support/deliveries";
import { settleEachTest } from "../support/storage";

/**
 * Fan-out (docs/processing.md, "Deliveries"): one source, several routes, one delivery per matched route, each with
 * its own status, retries, dead letter and replay. Through the real route and queue, forwards to the Node stand-in
 * (whose record, per Idempotency-Key `<receipt>:<route>`, is the evidence). Sources: test/fixtures/sources/fanout.json.
 */

settleEachTest();

interface DeliveryRow {
  route: string;
  status: string;
  attempts: number;
  lastError: string | null;
}

async function deliveryRows(receiptId: string): Promise<DeliveryRow[]> {
  const { results } = await env.DB.prepare(
    "SELECT route, status, attempts, last_error AS lastError FROM deliveries WHERE receipt_id = ? ORDER BY route",
  )
    .bind(receiptId)
    .all<DeliveryRow>();
  return results;
}

async function receiptRoutes(receiptId: string) {
  return env.DB.prepare("SELECT route, filtered_routes AS filteredRoutes FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ route: string | null; filteredRoutes: string | null }>();
}

async function post200(source: string, eventKey: string, body: string): Promise<string> {
  const response = await post(`/webhooks/${source}`, body, signDemo(eventKey, body));
  expect(response.status).toBe(200);
  return eventually(
    async () =>
      (
        await env.DB.prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
          .bind(source, eventKey)
          .first<{ id: string }>()
      )?.id,
  );
}

const sent = async (receiptId: string, route: string) =>
  (await standinRequests(`${receiptId}:${route}`)).map((request) => request.answer);

describe("fan-out with one destination failing", { timeout: 60_000 }, () => {
  it("delivers the others exactly once, retries and dead-letters the failing one alone, and a replay of it re-runs nothing else", async () => {
    const body = JSON.stringify({ type: "account.credited", data: { account: "acct_fan1", amount: 5 } });
    const receiptId = await post200("routing-fanout", `fan_${crypto.randomUUID()}`, body);

    // flaky: its first attempt and both retries fail (max_retries 2), then it is dead; nobody else moves.
    await eventually(
      async () =>
        (await deliveryRows(receiptId)).find((row) => row.route === "flaky")?.status === "dead" ? true : undefined,
      30_000,
      "flaky dead",
    );
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1 });
    expect(await receiptRoutes(receiptId)).toEqual({ route: "ledger", filteredRoutes: "" });
    expect(await deliveryRows(receiptId)).toEqual([
      { route: "audit", status: "processed", attempts: 1, lastError: null },
      {
        route: "flaky",
        status: "dead",
        attempts: 3,
        lastError: expect.stringMatching(/gave up after 3 attempts: .*500/),
      },
    ]);
    expect(await sent(receiptId, "ledger")).toEqual([204]);
    expect(await sent(receiptId, "audit")).toEqual([204]);
    expect(await sent(receiptId, "flaky")).toEqual([500, 500, 500]);

    // The admin API's receipt detail lists each route's outcome; the receipt's summary says one delivery is dead.
    const detail = await (await adminGet(`/admin/api/receipts/${receiptId}`)).json<{
      summary: string;
      routes: { route: string; status: string; attempts: number }[];
    }>();
    expect(detail.summary).toBe("dead");
    expect(detail.routes.map(({ route, status, attempts }) => [route, status, attempts])).toEqual([
      ["ledger", "processed", 1],
      ["audit", "processed", 1],
      ["flaky", "dead", 3],
    ]);

    // Replaying flaky's delivery (the admin API's ?route=) delivers it once (the stand-in's 4th answer is 204) and
    // re-runs no other route.
    const replayed = await exports.default.fetch(
      new Request(`https://receiver.test/admin/api/receipts/${receiptId}/replay?route=flaky`, {
        method: "POST",
        headers: ADMIN,
      }),
    );
    expect(replayed.status).toBe(202);
    await eventually(
      async () =>
        (await deliveryRows(receiptId)).find((row) => row.route === "flaky")?.status === "processed" ? true : undefined,
      20_000,
      "flaky replayed",
    );
    expect(await sent(receiptId, "flaky")).toEqual([500, 500, 500, 204]);
    expect(await sent(receiptId, "ledger")).toEqual([204]);
    expect(await sent(receiptId, "audit")).toEqual([204]);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1, replayCount: 0 });

    // A route the receipt has no delivery to, and a further delivery that already committed: each is refused with
    // its own error, and nothing is reset or sent.
    const replayRoute = async (route: string) => {
      const response = await exports.default.fetch(
        new Request(`https://receiver.test/admin/api/receipts/${receiptId}/replay?route=${route}`, {
          method: "POST",
          headers: ADMIN,
        }),
      );
      return { status: response.status, code: (await response.json<{ error: { code: string } }>()).error.code };
    };
    const before = await deliveryRows(receiptId);
    expect(await replayRoute("nosuch")).toEqual({ status: 404, code: "delivery_not_found" });
    expect(await replayRoute("audit")).toEqual({ status: 409, code: "delivery_committed" });
    expect(await deliveryRows(receiptId)).toEqual(before);
    expect(await sent(receiptId, "audit")).toEqual([204]);
  });

  it("names a filtered-out route on the receipt and gives it no delivery", async () => {
    const body = JSON.stringify({ type: "account.closed", data: { account: "acct_fan2" } });
    const receiptId = await post200("routing-fanout", `fan_${crypto.randomUUID()}`, body);
    await eventually(
      async () => ((await receiptRoutes(receiptId))?.filteredRoutes === "audit" ? true : undefined),
      20_000,
      "fanned out",
    );
    expect((await deliveryRows(receiptId)).map((row) => row.route)).toEqual(["flaky"]);
    expect(await sent(receiptId, "audit")).toEqual([]);
    expect(await sent(receiptId, "ledger")).toEqual([204]);
  });
});

describe("a further delivery whose queue message was lost", () => {
  it("is found by the cron's re-drive once overdue, and delivered", async () => {
    const receiptId = await seedReceipt({
      source: "routing-fanout",
      payload: { type: "account.credited", data: { account: "acct_fan3", amount: 1 } },
      eventType: "account.credited",
      status: "processed",
    });
    const lostAt = Date.now() - OVERDUE_GRACE_MS - 60_000;
    await env.DB.prepare("UPDATE receipts SET route = 'ledger', filtered_routes = '' WHERE id = ?")
      .bind(receiptId)
      .run();
    await env.DB.prepare(
      "INSERT INTO deliveries (receipt_id, route, status, attempts, lease_generation, next_attempt_at) VALUES (?, 'audit', 'pending', 1, 1, ?)",
    )
      .bind(receiptId, lostAt)
      .run();
    expect(await reenqueueLostDeliveries(env, Date.now())).toBe(1);
    await eventually(
      async () => ((await deliveryRows(receiptId))[0]?.status === "processed" ? true : undefined),
      20_000,
      "re-driven delivery",
    );
    expect(await sent(receiptId, "audit")).toEqual([204]);
    expect(await sent(receiptId, "ledger")).toEqual([]);
    expect(await reenqueueLostDeliveries(env, Date.now())).toBe(0);
  });
});

describe("rows written per event", () => {
  const route = (name: string, filter?: Record<string, unknown>) => ({
    name,
    destination: "handler:accounts",
    ...(filter ? { filter } : {}),
  });
  const source = (...routes: Record<string, unknown>[]) => ({
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    type_path: "type",
    routes,
  });
  const fanEnv = envWithSources({
    "fan-rows-one": source(route("first")),
    "fan-rows-three": source(route("first"), route("second"), route("third")),
    "fan-rows-two": source(route("first"), route("second")),
    "fan-rows-two-and-filtered": source(route("first"), route("second"), route("third", { type: "account.closed" })),
    "fan-rows-filtered": source(route("first", { type: "account.closed" })),
  });

  /** The receiver's own D1 rows and calls one first attempt costs (the handler's effect metered apart). */
  async function firstAttemptCost(sourceName: string, status = "processed") {
    const accountId = `acct_${crypto.randomUUID().slice(0, 8)}`;
    const receiptId = await seedReceipt({
      source: sourceName,
      payload: { type: "account.credited", data: { account: accountId, amount: 1 } },
      eventType: "account.credited",
    });
    const before = meterReading().totals;
    expect(await processReceipt(fanEnv, receiptId)).toEqual({ kind: "done", status });
    const spent = difference(meterReading().totals, before);
    // Each matched route's handler applied the credit once.
    return {
      rows: spent.d1RowsWritten - spent.d1HandlerRowsWritten,
      calls: spent.d1Calls,
      credits: (await account(accountId))?.credits,
    };
  }

  it("costs one route what it always has, at most 2 rows and no D1 call for each further matched route, and nothing for a filtered-out one", async () => {
    const one = await firstAttemptCost("fan-rows-one");
    const three = await firstAttemptCost("fan-rows-three");
    const two = await firstAttemptCost("fan-rows-two");
    const twoAndFiltered = await firstAttemptCost("fan-rows-two-and-filtered");
    expect(one.rows).toBe(1);
    expect(three.rows).toBeLessThanOrEqual(one.rows + 4);
    expect(three.rows).toBe(3);
    expect(three.calls).toBe(one.calls);
    expect([one.credits, three.credits, two.credits, twoAndFiltered.credits]).toEqual([1, 3, 2, 2]);
    const filtered = await firstAttemptCost("fan-rows-filtered", "skipped");
    // A one-route source whose only route filters the event out: its update, and the status-entry index entry the
    // dead-letter and skipped lists page by; the 0013 trigger writes the row no second time (migrations/0014).
    expect(filtered.rows).toBe(2);
    expect(twoAndFiltered.rows).toBe(two.rows);
    expect(twoAndFiltered.calls).toBe(two.calls);
  });
});
