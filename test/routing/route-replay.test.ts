import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { adminPost } from "../admin/support";
import { receiptRow, seedReceipt, standinRequests } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { settleEachTest } from "../support/storage";

/**
 * Bulk replay of one route's dead letters (docs/routing.md, "Fan-out"; POST /admin/api/dead/replay with "route"):
 * the route's delivery is replayed whether it is the receipt's own or a further one, and nothing else of those
 * receipts runs. Sources routing-replay, routing-replay-other and routing-replay-one in test/fixtures/sources/fanout.json,
 * every route forwarding to the stand-in's /ok, whose record per Idempotency-Key `<receipt>:<route>` shows what ran.
 */

settleEachTest();

interface BulkReplay {
  replayed: number;
  more: boolean;
  cursor: string | null;
  results: { receiptId: string; outcome: string }[];
}

async function seedDelivery(receiptId: string, route: string, status: "dead" | "processed"): Promise<void> {
  await env.DB.prepare(
    "INSERT INTO deliveries (receipt_id, route, status, attempts, lease_generation, last_error, committed_at) VALUES (?, ?, ?, 3, 3, ?, ?)",
  )
    .bind(
      receiptId,
      route,
      status,
      status === "dead" ? "gave up after 3 attempts: 500" : null,
      status === "dead" ? null : 1,
    )
    .run();
}

/** A receipt of `source` whose own delivery is `route` (null: a one-route source's), in `status`. */
async function seedEvent(source: string, route: string | null, status: string, receivedAt: number, eventType: string) {
  const receiptId = await seedReceipt({ source, payload: { type: eventType }, eventType, receivedAt, status });
  await env.DB.prepare("UPDATE receipts SET route = ?, filtered_routes = ?, attempts = 3 WHERE id = ?")
    .bind(route, route === null ? null : "", receiptId)
    .run();
  return receiptId;
}

async function statuses(receiptId: string) {
  const { results } = await env.DB.prepare("SELECT route, status FROM deliveries WHERE receipt_id = ? ORDER BY route")
    .bind(receiptId)
    .all<{ route: string; status: string }>();
  return {
    own: (await receiptRow(receiptId)).status,
    further: Object.fromEntries(results.map((row) => [row.route, row.status])),
  };
}

const routeColumns = (receiptId: string) =>
  env.DB.prepare("SELECT route, filtered_routes AS filteredRoutes FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ route: string | null; filteredRoutes: string | null }>();

const sent = async (receiptId: string, route: string) =>
  (await standinRequests(`${receiptId}:${route}`)).map((request) => request.answer);

/** A bulk replay by route whose one page replays exactly this receipt. */
async function expectReplaysOnly(filter: { source: string; route: string; type: string }, receiptId: string) {
  const response = await adminPost("/admin/api/dead/replay", filter);
  expect(await response.json<BulkReplay>()).toMatchObject({
    replayed: 1,
    more: false,
    results: [{ receiptId, outcome: "replayed" }],
  });
}

describe("bulk replay of one route's dead letters", { timeout: 60_000 }, () => {
  it("replays that route's dead deliveries, the receipts' own and further ones, page by page, and runs nothing else", async () => {
    const eventType = `route.replay.${crypto.randomUUID()}`;
    const at = Date.now() - 60_000;
    // r1: own route first dead; second dead; third processed.   r2: first processed; second and third dead.
    // r3: own route second dead; third dead.                     elsewhere: another source's route second, dead.
    const r1 = await seedEvent("routing-replay", "first", "dead", at, eventType);
    await seedDelivery(r1, "second", "dead");
    await seedDelivery(r1, "third", "processed");
    const r2 = await seedEvent("routing-replay", "first", "processed", at + 1, eventType);
    await seedDelivery(r2, "second", "dead");
    await seedDelivery(r2, "third", "dead");
    const r3 = await seedEvent("routing-replay", "second", "dead", at + 2, eventType);
    await seedDelivery(r3, "third", "dead");
    const elsewhere = await seedEvent("routing-replay-other", "first", "processed", at + 3, eventType);
    await seedDelivery(elsewhere, "second", "dead");

    const filter = { source: "routing-replay", route: "second", type: eventType, limit: 2 };
    const first = await adminPost("/admin/api/dead/replay", filter);
    expect(first.status).toBe(200);
    const firstPage = await first.json<BulkReplay>();
    expect(firstPage).toMatchObject({ replayed: 2, more: true, cursor: r2 });
    expect(firstPage.results).toEqual([
      { receiptId: r1, outcome: "replayed" },
      { receiptId: r2, outcome: "replayed" },
    ]);
    const secondPage = await (
      await adminPost("/admin/api/dead/replay", { ...filter, after: firstPage.cursor })
    ).json<BulkReplay>();
    expect(secondPage).toMatchObject({ replayed: 1, more: false, cursor: r3 });
    expect(secondPage.results).toEqual([{ receiptId: r3, outcome: "replayed" }]);

    // Each replayed delivery runs once more and is processed; every other route of those receipts is as it was.
    await eventually(
      async () => {
        const [one, two, three] = await Promise.all([statuses(r1), statuses(r2), statuses(r3)]);
        return one.further.second === "processed" && two.further.second === "processed" && three.own === "processed"
          ? true
          : undefined;
      },
      20_000,
      "route second's dead letters processed",
    );
    expect(await statuses(r1)).toEqual({ own: "dead", further: { second: "processed", third: "processed" } });
    expect(await statuses(r2)).toEqual({ own: "processed", further: { second: "processed", third: "dead" } });
    expect(await statuses(r3)).toEqual({ own: "processed", further: { third: "dead" } });
    expect(await statuses(elsewhere)).toEqual({ own: "processed", further: { second: "dead" } });
    for (const receiptId of [r1, r2, r3]) expect(await sent(receiptId, "second")).toEqual([204]);
    for (const receiptId of [r1, r2, r3]) {
      expect(await sent(receiptId, "first")).toEqual([]);
      expect(await sent(receiptId, "third")).toEqual([]);
    }
    expect(await sent(elsewhere, "second")).toEqual([]);
  });

  it("replays a one-route source's dead receipts by its route's name", async () => {
    const eventType = `route.replay.one.${crypto.randomUUID()}`;
    const dead = await seedEvent("routing-replay-one", null, "dead", Date.now() - 1000, eventType);
    await expectReplaysOnly({ source: "routing-replay-one", route: "default", type: eventType }, dead);
    await eventually(async () => ((await receiptRow(dead)).status === "processed" ? true : undefined), 20_000);
  });

  it("replays by any route a receipt that died before its fan-out was written, and its replay runs the fan-out once", async () => {
    const eventType = `route.replay.unrouted.${crypto.randomUUID()}`;
    // Its first consumption's lease ran out with its retries spent (a consumer killed by it each time): dead before
    // any route was recorded.
    const receiptId = await seedReceipt({
      source: "routing-replay",
      payload: { type: eventType },
      eventType,
      receivedAt: Date.now() - 1000,
      status: "processing",
    });
    await env.DB.prepare("UPDATE receipts SET attempts = 50, lease_generation = 50, lease_until = ? WHERE id = ?")
      .bind(Date.now() - 1000, receiptId)
      .run();
    expect(await processReceipt(env, receiptId)).toEqual({ kind: "done", status: "dead" });
    expect(await routeColumns(receiptId)).toEqual({ route: null, filteredRoutes: null });

    await expectReplaysOnly({ source: "routing-replay", route: "third", type: eventType }, receiptId);
    await eventually(
      async () => {
        const now = await statuses(receiptId);
        return now.own === "processed" && now.further.second === "processed" && now.further.third === "processed"
          ? true
          : undefined;
      },
      20_000,
      "the replayed event fanned out and delivered",
    );
    expect(await routeColumns(receiptId)).toEqual({ route: "first", filteredRoutes: "" });
    for (const route of ["first", "second", "third"]) expect(await sent(receiptId, route)).toEqual([204]);
  });

  it("refuses a route the source does not have, or a route without its source, and replays nothing", async () => {
    const eventType = `route.replay.refused.${crypto.randomUUID()}`;
    const r1 = await seedEvent("routing-replay", "first", "dead", Date.now() - 1000, eventType);
    await seedDelivery(r1, "second", "dead");
    const refused = async (body: Record<string, unknown>) => {
      const response = await adminPost("/admin/api/dead/replay", { type: eventType, ...body });
      const { error } = await response.json<{ error: { code: string; message: string } }>();
      return { status: response.status, code: error.code, message: error.message };
    };
    expect(await refused({ source: "routing-replay", route: "nosuch" })).toEqual({
      status: 404,
      code: "route_not_found",
      message: 'Source "routing-replay" has no route "nosuch" (its routes: first, second, third).',
    });
    expect(await refused({ source: "no-such-source", route: "second" })).toMatchObject({
      status: 404,
      code: "route_not_found",
    });
    expect(await refused({ all: true, route: "second" })).toMatchObject({ status: 400, code: "invalid_body" });
    expect(await refused({ source: "routing-replay", route: "" })).toMatchObject({ status: 400, code: "invalid_body" });
    expect(await statuses(r1)).toEqual({ own: "dead", further: { second: "dead" } });
  });
});
