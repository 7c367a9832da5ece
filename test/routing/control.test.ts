import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { meterReading } from "../../src/lib/meter";
import { systemMonitor } from "../../src/monitor/report";
import { ADMIN, adminGet, DASHBOARD_ORIGIN, dashboardPage, dashboardSession } from "../admin/support";
import { receiptRow, seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { keysOf, lane, pauseThenSend, send, setLane } from "./gate-support";

/**
 * Delivery control per route (docs/routing.md "Delivery control"), through the real pipeline: signed deliveries
 * posted to /webhooks/<source>, relayed, consumed from the queue, and forwarded to a lane of the Node stand-in
 * (test/setup/global/forward-standin.ts), which records what arrived and how many of the lane's requests were open
 * at once. Sources: test/fixtures/sources/gates.json. Every assertion is a count.
 */

async function allProcessed(receiptIds: readonly string[], timeoutMs = 60_000): Promise<void> {
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map(receiptRow))).every((row) => row.status === "processed") ? true : undefined,
    timeoutMs,
    "every receipt processed",
  );
}

/** Held by its gate: pending, due again later, and no attempt spent. */
async function allHeld(receiptIds: readonly string[]): Promise<void> {
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map(receiptRow))).every(
        (row) => row.status === "pending" && row.nextAttemptAt !== null,
      )
        ? true
        : undefined,
    30_000,
    "every receipt held",
  );
}

describe("max_in_flight", () => {
  it("never has more than N attempts open at the destination, and a delivery that waits spends no attempt", {
    timeout: 120_000,
  }, async () => {
    const receiptIds = await Promise.all(Array.from({ length: 8 }, (_, n) => send("gate-in-flight", n)));
    await allProcessed(receiptIds, 90_000);
    const requests = await lane("in-flight");
    expect(keysOf(requests).sort()).toEqual([...receiptIds].sort());
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBeLessThanOrEqual(2);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row.attempts).toBe(1);
  });
});

describe("rate_limit", () => {
  it("never lets more than the limit reach the destination in any window", { timeout: 120_000 }, async () => {
    const receiptIds = await Promise.all(Array.from({ length: 9 }, (_, n) => send("gate-rate", n)));
    await allProcessed(receiptIds, 90_000);
    const requests = await lane("rate");
    expect(keysOf(requests).sort()).toEqual([...receiptIds].sort());
    // "3/s": in the second that starts at any arrival, at most 3 arrivals.
    const arrivals = requests.map((request) => request.receivedAt).sort((a, b) => a - b);
    const busiest = Math.max(
      ...arrivals.map((start) => arrivals.filter((at) => at >= start && at < start + 1000).length),
    );
    expect(
      busiest,
      `arrivals, ms after the first: ${arrivals.map((at) => at - arrivals[0]!).join(", ")}`,
    ).toBeLessThanOrEqual(3);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row.attempts).toBe(1);
  });
});

describe("circuit_breaker", () => {
  it("opens after N failures with one alert, holds deliveries without spending attempts, and closes on the first success", {
    timeout: 120_000,
  }, async () => {
    await setLane("breaker", 503);
    const failing = [await send("gate-breaker", 1), await send("gate-breaker", 2)];
    await eventually(
      async () =>
        (await Promise.all(failing.map(receiptRow))).every((row) => row.attempts === 1 && row.status === "pending")
          ? true
          : undefined,
      30_000,
      "two failed attempts",
    );
    const openAlerts = async () =>
      (await systemMonitor(env).list()).filter(
        (alert) => alert.kind === "route-breaker-open" && alert.state === "open",
      );
    await eventually(async () => ((await openAlerts()).length === 1 ? true : undefined), 10_000, "the breaker's alert");
    expect((await openAlerts())[0]!.reporters).toEqual(["route:gate-breaker/flaky"]);
    const health = await (await exports.default.fetch(new Request("https://receiver.test/health"))).json<{
      reasons?: string[];
    }>();
    expect(health.reasons).toContain("route-breaker-open");

    // Open: later deliveries are held, unattempted, and the destination sees nothing more.
    const held = [await send("gate-breaker", 3), await send("gate-breaker", 4), await send("gate-breaker", 5)];
    await allHeld(held);
    for (const row of await Promise.all(held.map(receiptRow)))
      expect(row).toMatchObject({ status: "pending", attempts: 0 });
    expect((await lane("breaker")).length).toBe(2);
    const view = await (await adminGet("/admin/api/sources/gate-breaker/routes/flaky")).json<{
      gate: { breakerOpen: boolean; failures: number };
    }>();
    expect(view.gate).toMatchObject({ breakerOpen: true, failures: 2 });

    // The destination recovers; the probe interval (1 h) later, one probe goes through and its success closes it.
    await setLane("breaker", 204);
    const afterInterval = Date.now() + 3_600_000 + 60_000;
    expect(await processReceipt(env, held[0]!, afterInterval)).toEqual({ kind: "done", status: "processed" });
    expect(await openAlerts()).toEqual([]);
    for (const receiptId of [...held.slice(1), ...failing])
      expect(await processReceipt(env, receiptId, afterInterval)).toEqual({ kind: "done", status: "processed" });
    expect((await Promise.all(held.map(receiptRow))).map((row) => row.attempts)).toEqual([1, 1, 1]);
    expect((await Promise.all(failing.map(receiptRow))).map((row) => row.attempts)).toEqual([2, 2]);
    expect((await lane("breaker")).map((request) => request.answer)).toEqual([503, 503, 204, 204, 204, 204, 204]);
  });
});

describe("pause and resume", () => {
  const path = "/admin/api/sources/gate-paused/routes/held";
  const change = (what: "pause" | "resume", route = path) =>
    exports.default.fetch(new Request(`https://receiver.test${route}/${what}`, { method: "POST", headers: ADMIN }));

  it("holds a paused route's deliveries unattempted, then sends them in received order", {
    timeout: 120_000,
  }, async () => {
    const receiptIds = await pauseThenSend("gate-paused", "held", 4);
    await allHeld(receiptIds);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row.attempts).toBe(0);
    expect(await lane("paused")).toEqual([]);
    expect(await (await adminGet(path)).json()).toMatchObject({ gate: { paused: true, held: 4 } });

    const resumed = await change("resume");
    expect(await resumed.json()).toMatchObject({ resumed: 4, gate: { paused: false, held: 0 } });
    await allProcessed(receiptIds);
    expect(keysOf(await lane("paused"))).toEqual(receiptIds);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row.attempts).toBe(1);
  });

  it("has a Pause / Resume button on the dashboard's source page", async () => {
    const origin = DASHBOARD_ORIGIN;
    const page = dashboardPage;
    const cookie = await dashboardSession();
    const sourcePage = async () => (await page("/admin/sources/gate-paused", { headers: { cookie } })).text();
    expect(await sourcePage()).toContain('id="route-held-pause"');
    const paused = await page("/admin/sources/gate-paused/routes/held/pause", {
      method: "POST",
      headers: { cookie, origin },
    });
    expect(paused.status).toBe(303);
    const html = await sourcePage();
    expect(html).toContain('id="route-held-paused"');
    expect(html).toContain('id="route-held-resume"');
    expect(
      (await page("/admin/sources/gate-paused/routes/held/resume", { method: "POST", headers: { cookie, origin } }))
        .status,
    ).toBe(303);
    expect(await sourcePage()).toContain('id="route-held-running"');
    // Cross-site posts are refused, as every dashboard form's.
    expect(
      (
        await page("/admin/sources/gate-paused/routes/held/pause", {
          method: "POST",
          headers: { cookie, origin: "https://evil.example" },
        })
      ).status,
    ).toBe(403);
  });

  it("shows a Pause button for a further route of a fan-out source, and pauses that route alone", async () => {
    const origin = DASHBOARD_ORIGIN;
    const page = dashboardPage;
    const cookie = await dashboardSession();
    const sourcePage = async () => (await page("/admin/sources/gate-fanout-paused", { headers: { cookie } })).text();
    const before = await sourcePage();
    // The first route has no control options: no panel; the second has one.
    expect(before).not.toContain('id="route-plain"');
    expect(before).toContain('id="route-held-pause"');
    const paused = await page("/admin/sources/gate-fanout-paused/routes/held/pause", {
      method: "POST",
      headers: { cookie, origin },
    });
    expect(paused.status).toBe(303);
    expect(await sourcePage()).toContain('id="route-held-resume"');
    const resumed = await page("/admin/sources/gate-fanout-paused/routes/held/resume", {
      method: "POST",
      headers: { cookie, origin },
    });
    expect(resumed.status).toBe(303);
    expect(await sourcePage()).toContain('id="route-held-running"');
  });

  it("answers why a route cannot be paused", async () => {
    const uncontrolled = await change("pause", "/admin/api/sources/routing-plain/routes/backend");
    expect(uncontrolled.status).toBe(409);
    expect(await uncontrolled.json()).toMatchObject({ error: { code: "route_not_controlled" } });
    expect((await change("pause", "/admin/api/sources/gate-paused/routes/nope")).status).toBe(404);
    expect((await change("pause", "/admin/api/sources/nope/routes/held")).status).toBe(404);
  });
});

describe("a route without control options", () => {
  it("makes no gate request, while a controlled route asks its gate once and tells it once", async () => {
    const plain = await seedReceipt({ source: "routing-plain", payload: { type: "account.credited" } });
    const before = meterReading().totals.doRequests;
    expect(await processReceipt(env, plain)).toEqual({ kind: "done", status: "processed" });
    expect(meterReading().totals.doRequests - before).toBe(0);

    const controlled = await seedReceipt({ source: "gate-rate", payload: { type: "account.credited" } });
    const beforeControlled = meterReading().totals.doRequests;
    expect(await processReceipt(env, controlled)).toEqual({ kind: "done", status: "processed" });
    expect(meterReading().totals.doRequests - beforeControlled).toBe(2);
  });
});
