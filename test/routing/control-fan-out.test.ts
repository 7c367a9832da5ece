import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import { processReceipt } from "../../src/consumers/receipts/process";
import { meterReading } from "../../src/lib/meter";
import { systemMonitor } from "../../src/monitor/report";
import { reenqueueLostDeliveries } from "../../src/reconcile/redrive-deliveries";
import { adminGet } from "../admin/support";
import { receiptRow, seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { changeRoute, keysOf, lane, pauseThenSend, send, setLane } from "./gate-support";

/**
 * Delivery control on a source's SECOND route (docs/routing.md "Delivery control"): every delivery of a controlled
 * route asks its gate, the further ones too — on the event's first attempt (the fan-out) and on each later attempt
 * (a message naming the route). Through the real route and queue, forwarding to lanes of the Node stand-in; the first
 * route of each source is uncontrolled and must not notice. Sources: test/fixtures/sources/gates.json. Every
 * assertion is a count.
 */

interface DeliveryRow {
  status: string;
  attempts: number;
  nextAttemptAt: number | null;
}

async function deliveryRow(receiptId: string, route: string): Promise<DeliveryRow | null> {
  return env.DB.prepare(
    "SELECT status, attempts, next_attempt_at AS nextAttemptAt FROM deliveries WHERE receipt_id = ? AND route = ?",
  )
    .bind(receiptId, route)
    .first<DeliveryRow>();
}

async function every(receiptIds: readonly string[], route: string, what: string, test: (row: DeliveryRow) => boolean) {
  await eventually(
    async () => {
      const rows = await Promise.all(receiptIds.map((receiptId) => deliveryRow(receiptId, route)));
      return rows.every((row) => row !== null && test(row)) ? true : undefined;
    },
    90_000,
    what,
  );
}

const processed = (row: DeliveryRow) => row.status === "processed";
/** Held by its gate: pending, due again later, and no attempt spent. */
const held = (row: DeliveryRow) => row.status === "pending" && row.nextAttemptAt !== null && row.attempts === 0;
const keys = (receiptIds: readonly string[], route: string) => receiptIds.map((receiptId) => `${receiptId}:${route}`);

async function ownRoutesProcessed(receiptIds: readonly string[]): Promise<void> {
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map(receiptRow))).every((row) => row.status === "processed" && row.attempts === 1)
        ? true
        : undefined,
    30_000,
    "every receipt's own route processed",
  );
}

describe("max_in_flight on a further route", () => {
  it("never has more than one attempt open there, spends no attempt on a held delivery, and delivers each once", {
    timeout: 150_000,
  }, async () => {
    const receiptIds = await Promise.all(Array.from({ length: 8 }, (_, n) => send("gate-fanout-in-flight", n)));
    await every(receiptIds, "slow", "every slow delivery processed", processed);
    const requests = await lane("fan-in-flight");
    expect(keysOf(requests).sort()).toEqual(keys(receiptIds, "slow").sort());
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBe(1);
    for (const receiptId of receiptIds) expect((await deliveryRow(receiptId, "slow"))?.attempts).toBe(1);
    // The first route took each event at once, on the receipt's one attempt.
    await ownRoutesProcessed(receiptIds);
    expect(keysOf(await lane("fan-plain")).sort()).toEqual(keys(receiptIds, "plain").sort());
  });
});

describe("rate_limit on a further route", () => {
  it("never lets more than the limit reach it in any window, and delivers each once", {
    timeout: 150_000,
  }, async () => {
    const receiptIds = await Promise.all(Array.from({ length: 9 }, (_, n) => send("gate-fanout-rate", n)));
    await every(receiptIds, "limited", "every limited delivery processed", processed);
    const requests = await lane("fan-rate");
    expect(keysOf(requests).sort()).toEqual(keys(receiptIds, "limited").sort());
    // "3/s": in the second that starts at any arrival, at most 3 arrivals.
    const arrivals = requests.map((request) => request.receivedAt).sort((a, b) => a - b);
    const busiest = Math.max(
      ...arrivals.map((start) => arrivals.filter((at) => at >= start && at < start + 1000).length),
    );
    expect(busiest).toBeLessThanOrEqual(3);
    for (const receiptId of receiptIds) expect((await deliveryRow(receiptId, "limited"))?.attempts).toBe(1);
    await ownRoutesProcessed(receiptIds);
  });
});

describe("a paused further route", () => {
  const path = "/admin/api/sources/gate-fanout-paused/routes/held";
  const change = (what: "pause" | "resume") => changeRoute("gate-fanout-paused", "held", what);

  it("holds its deliveries unattempted while the first route delivers, then resume sends them in received order", {
    timeout: 150_000,
  }, async () => {
    const receiptIds = await pauseThenSend("gate-fanout-paused", "held", 4);
    await ownRoutesProcessed(receiptIds);
    await every(receiptIds, "held", "every held delivery held", held);
    expect(await lane("fan-paused")).toEqual([]);
    expect(keysOf(await lane("fan-paused-plain"))).toEqual(keys(receiptIds, "plain"));
    expect(await (await adminGet(path)).json()).toMatchObject({ gate: { paused: true, held: 4 } });
    // Each is due when the gate said (15 minutes on), its message alive: the cron's re-drive sends no copy.
    expect(await reenqueueLostDeliveries(env, Date.now() + 5 * 60_000)).toBe(0);

    expect(await (await change("resume")).json()).toMatchObject({ resumed: 4, gate: { paused: false, held: 0 } });
    await every(receiptIds, "held", "every held delivery processed", processed);
    expect(keysOf(await lane("fan-paused"))).toEqual(keys(receiptIds, "held"));
    for (const receiptId of receiptIds) expect((await deliveryRow(receiptId, "held"))?.attempts).toBe(1);
    expect((await Promise.all(receiptIds.map(receiptRow))).map((row) => row.attempts)).toEqual([1, 1, 1, 1]);
  });
});

describe("a circuit breaker on a further route", () => {
  it("opens on that route's failures and holds its deliveries, while the first route goes on delivering", {
    timeout: 150_000,
  }, async () => {
    await setLane("fan-breaker", 503);
    const failing = [await send("gate-fanout-breaker", 1), await send("gate-fanout-breaker", 2)];
    await every(failing, "fragile", "two failed attempts", (row) => row.status === "pending" && row.attempts === 1);
    const openAlerts = async () =>
      (await systemMonitor(env).list()).filter(
        (alert) => alert.kind === "route-breaker-open" && alert.state === "open",
      );
    await eventually(async () => ((await openAlerts()).length === 1 ? true : undefined), 10_000, "the breaker's alert");
    expect((await openAlerts())[0]!.reporters).toEqual(["route:gate-fanout-breaker/fragile"]);

    // Open: the further route's deliveries are held unattempted; the first route takes every event.
    const later = [
      await send("gate-fanout-breaker", 3),
      await send("gate-fanout-breaker", 4),
      await send("gate-fanout-breaker", 5),
    ];
    await ownRoutesProcessed([...failing, ...later]);
    await every(later, "fragile", "the later deliveries held", held);
    expect((await lane("fan-breaker")).length).toBe(2);
    expect(keysOf(await lane("fan-steady"))).toEqual(keys([...failing, ...later], "steady"));

    // The destination recovers; the probe interval (1 h) later, one probe goes through and its success closes it.
    await setLane("fan-breaker", 204);
    const afterInterval = Date.now() + 3_600_000 + 60_000;
    expect((await processDeliveries(env, "fragile", [later[0]!], afterInterval)).get(later[0]!)).toEqual({
      kind: "done",
      status: "processed",
    });
    expect(await openAlerts()).toEqual([]);
    const rest = [...later.slice(1), ...failing];
    for (const [, verdict] of await processDeliveries(env, "fragile", rest, afterInterval))
      expect(verdict).toEqual({ kind: "done", status: "processed" });
    expect((await Promise.all(later.map((id) => deliveryRow(id, "fragile")))).map((row) => row?.attempts)).toEqual([
      1, 1, 1,
    ]);
    expect((await Promise.all(failing.map((id) => deliveryRow(id, "fragile")))).map((row) => row?.attempts)).toEqual([
      2, 2,
    ]);
    expect((await lane("fan-breaker")).map((request) => request.answer)).toEqual([503, 503, 204, 204, 204, 204, 204]);
  });
});

describe("what a further route's gate costs", () => {
  it("no gate request for a source whose routes have no control; one ask and one tell for a controlled second route", async () => {
    const doRequests = async (source: string) => {
      const payload = {
        type: "account.credited",
        data: { account: `acct_${crypto.randomUUID().slice(0, 8)}`, amount: 1 },
      };
      const receiptId = await seedReceipt({ source, payload });
      const before = meterReading().totals.doRequests;
      expect((await processReceipt(env, receiptId)).kind).toBe("done");
      return meterReading().totals.doRequests - before;
    };
    expect(await doRequests("routing-fanout-rows")).toBe(0);
    expect(await doRequests("gate-fanout-cost")).toBe(2);
  });
});
