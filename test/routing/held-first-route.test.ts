import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { notAttempted } from "../../src/consumers/commit/delivery-rows";
import { writeHeldFanOuts } from "../../src/consumers/deliveries/held-fan-out";
import { loadReceipts } from "../../src/consumers/load/load";
import { processReceipt } from "../../src/consumers/receipts/process";
import { database } from "../../src/db/client";
import { receiptRow, seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { failFanOutOf } from "../support/failpoints";
import { changeRoute, keysOf, lane, pauseThenSend, send, setLane } from "./gate-support";

/**
 * Delivery control on a source's FIRST route (docs/routing.md "Delivery control", docs/processing.md "Deliveries"):
 * the route the receipt row carries. Its gate holding an event never delays the source's other routes: the event's
 * fan-out is written on its first consumption all the same, each further route delivers it at once (exactly once),
 * and the first route's delivery waits alone, with no attempt spent. Through the real route and queue, forwarding to
 * lanes of the Node stand-in. Sources gate-first-paused and gate-first-breaker in test/fixtures/sources/gates.json.
 */

const FURTHER = ["second", "third"] as const;
const keys = (receiptIds: readonly string[], route: string) => receiptIds.map((receiptId) => `${receiptId}:${route}`);

async function deliveryRows(receiptId: string) {
  const { results } = await env.DB.prepare(
    "SELECT route, status, attempts FROM deliveries WHERE receipt_id = ? ORDER BY route",
  )
    .bind(receiptId)
    .all<{ route: string; status: string; attempts: number }>();
  return results;
}

async function filteredRoutes(receiptId: string): Promise<string | null> {
  const row = await env.DB.prepare("SELECT filtered_routes AS filtered FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ filtered: string | null }>();
  return row!.filtered;
}

/** Every further route processed each event, on one attempt. */
async function furtherProcessed(receiptIds: readonly string[]): Promise<void> {
  await eventually(
    async () => {
      const rows = await Promise.all(receiptIds.map(deliveryRows));
      return rows.every(
        (routes) =>
          routes.length === FURTHER.length && routes.every((row) => row.status === "processed" && row.attempts === 1),
      )
        ? true
        : undefined;
    },
    60_000,
    "every further route's delivery processed",
  );
}

/** The first route's delivery (the receipt row's) held: pending, due later, no attempt spent. */
async function expectHeld(receiptIds: readonly string[]): Promise<void> {
  for (const receiptId of receiptIds)
    expect(await receiptRow(receiptId)).toMatchObject({
      status: "pending",
      attempts: 0,
      nextAttemptAt: expect.any(Number),
    });
}

/** What a lane received for these receipts (a lane is shared by this file's tests). */
async function laneKeys(name: string, receiptIds: readonly string[]): Promise<string[]> {
  return keysOf(await lane(name)).filter(
    (key): key is string => key !== undefined && receiptIds.some((receiptId) => key.startsWith(`${receiptId}:`)),
  );
}

async function expectEachFurtherLaneOnce(prefix: string, receiptIds: readonly string[]): Promise<void> {
  for (const route of FURTHER)
    expect((await laneKeys(`${prefix}-${route}`, receiptIds)).sort()).toEqual(keys(receiptIds, route).sort());
}

describe("a paused first route", () => {
  const change = (what: "pause" | "resume") => changeRoute("gate-first-paused", "held", what);

  /** Pauses the route, then stores one event for it straight in D1 (its consumption is the test's to run). */
  async function pausedEvent(account: string): Promise<string> {
    expect(await (await change("pause")).json()).toMatchObject({ gate: { paused: true } });
    return seedReceipt({
      source: "gate-first-paused",
      payload: { type: "account.credited", data: { account, amount: 1 } },
      eventType: "account.credited",
    });
  }

  /** Resuming re-sends the one held event, and its first route's delivery goes through once. */
  async function resumeDelivers(receiptId: string): Promise<void> {
    expect(await (await change("resume")).json()).toMatchObject({ resumed: 1, gate: { paused: false } });
    await eventually(
      async () => ((await receiptRow(receiptId)).status === "processed" ? true : undefined),
      60_000,
      "the first route's delivery processed",
    );
    expect(await laneKeys("first-paused", [receiptId])).toEqual(keys([receiptId], "held"));
  }

  it("holds only its own deliveries: the other routes deliver each event once, and resume re-sends them nothing", {
    timeout: 150_000,
  }, async () => {
    const receiptIds = await pauseThenSend("gate-first-paused", "held", 3);

    await furtherProcessed(receiptIds);
    await expectHeld(receiptIds);
    expect(await laneKeys("first-paused", receiptIds)).toEqual([]);
    await expectEachFurtherLaneOnce("first-paused", receiptIds);

    expect(await (await change("resume")).json()).toMatchObject({ resumed: 3, gate: { paused: false, held: 0 } });
    await eventually(
      async () =>
        (await Promise.all(receiptIds.map(receiptRow))).every((row) => row.status === "processed") ? true : undefined,
      60_000,
      "every first-route delivery processed",
    );
    expect(await laneKeys("first-paused", receiptIds)).toEqual(keys(receiptIds, "held"));
    expect((await Promise.all(receiptIds.map(receiptRow))).map((row) => row.attempts)).toEqual([1, 1, 1]);
    await expectEachFurtherLaneOnce("first-paused", receiptIds);
    for (const receiptId of receiptIds)
      expect((await deliveryRows(receiptId)).map((row) => row.attempts)).toEqual([1, 1]);
  });

  it("writes a held event's fan-out once when two consumers take its first consumption at once", {
    timeout: 150_000,
  }, async () => {
    const receiptId = await pausedEvent("acct_race");
    const verdicts = await Promise.all([processReceipt(env, receiptId), processReceipt(env, receiptId)]);
    for (const verdict of verdicts) expect(verdict).toMatchObject({ kind: "retry" });
    await furtherProcessed([receiptId]);
    await expectHeld([receiptId]);
    await expectEachFurtherLaneOnce("first-paused", [receiptId]);

    await resumeDelivers(receiptId);
    await expectEachFurtherLaneOnce("first-paused", [receiptId]);
  });

  it("tells a D1 failure writing a held event's fan-out (the consumption fails, nothing written) from another run's fan-out (skipped)", {
    timeout: 150_000,
  }, async () => {
    const receiptId = await pausedEvent("acct_d1_down");
    const [beforeFanOut] = await loadReceipts(database(env), [receiptId], env);

    // D1 fails inside the batch: the error goes up (the consumer's message is retried), and nothing is written.
    const restore = await failFanOutOf(receiptId);
    try {
      await expect(processReceipt(env, receiptId)).rejects.toThrow("injected failure writing the fan-out");
    } finally {
      await restore();
    }
    expect(await deliveryRows(receiptId)).toEqual([]);
    expect(await filteredRoutes(receiptId)).toBeNull();

    // Its retry writes the fan-out; a run that read the receipt before that finds its guard aborting, and skips.
    expect(await processReceipt(env, receiptId)).toMatchObject({ kind: "retry" });
    const sameFanOut = {
      route: "held",
      filtered: [],
      further: FURTHER.map((route) => notAttempted(route, Date.now(), 0, null)),
    };
    await writeHeldFanOuts(env, [{ receipt: beforeFanOut!, fanOut: sameFanOut }]);
    await furtherProcessed([receiptId]);
    await expectHeld([receiptId]);
    await expectEachFurtherLaneOnce("first-paused", [receiptId]);

    await resumeDelivers(receiptId);
  });
});

describe("an open circuit breaker on the first route", () => {
  it("holds only that route's deliveries while the other routes deliver each event once; its probe re-sends them nothing", {
    timeout: 150_000,
  }, async () => {
    await setLane("first-breaker", 503);
    const failing = [await send("gate-first-breaker", 1), await send("gate-first-breaker", 2)];
    await eventually(
      async () =>
        (await Promise.all(failing.map(receiptRow))).every((row) => row.status === "pending" && row.attempts === 1)
          ? true
          : undefined,
      60_000,
      "two failed first-route attempts",
    );
    await furtherProcessed(failing);

    // Open: the first route's deliveries of later events are held unattempted; the other routes take them at once.
    const later = [
      await send("gate-first-breaker", 3),
      await send("gate-first-breaker", 4),
      await send("gate-first-breaker", 5),
    ];
    await furtherProcessed(later);
    await expectHeld(later);
    expect((await lane("first-breaker")).length).toBe(2);
    await expectEachFurtherLaneOnce("first-breaker", [...failing, ...later]);

    // The destination recovers; the probe interval (1 h) later, one probe goes through and its success closes it.
    await setLane("first-breaker", 204);
    const afterInterval = Date.now() + 3_600_000 + 60_000;
    expect(await processReceipt(env, later[0]!, afterInterval)).toEqual({ kind: "done", status: "processed" });
    for (const receiptId of [...later.slice(1), ...failing])
      expect(await processReceipt(env, receiptId, afterInterval)).toEqual({ kind: "done", status: "processed" });
    expect((await Promise.all(later.map(receiptRow))).map((row) => row.attempts)).toEqual([1, 1, 1]);
    expect((await Promise.all(failing.map(receiptRow))).map((row) => row.attempts)).toEqual([2, 2]);
    expect((await lane("first-breaker")).map((request) => request.answer)).toEqual([503, 503, 204, 204, 204, 204, 204]);
    await expectEachFurtherLaneOnce("first-breaker", [...failing, ...later]);
  });
});
