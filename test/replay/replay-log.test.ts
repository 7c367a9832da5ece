import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { timeline } from "../../src/admin/dashboard/pages/receipt";
import { receiptDetail } from "../../src/admin/receipts/receipt-detail";
import { database } from "../../src/db/client";
import { receipts, replays } from "../../src/db/schema";
import { applyRetention } from "../../src/reconcile/retention";
import { replayDeadReceipts, replayReceipt } from "../../src/replay/replay-receipts";
import { loadSources } from "../../src/sources/registry";
import { adminGet, adminPost } from "../admin/support";
import { seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";

/**
 * The replay log: one `replays` row per replay, written with the reset (same batch, same condition), shown by the
 * admin API's receipt detail and the dashboard's timeline, and deleted with its receipt by retention. Receipts go
 * to a destination that answers 2xx, so each replayed run finishes and the next replay can start.
 */

const SOURCE = "proc-forward-ok";

async function logOf(receiptId: string) {
  return database(env).select().from(replays).where(eq(replays.receiptId, receiptId)).orderBy(replays.replayNumber);
}

async function replayCount(receiptId: string): Promise<number> {
  const [row] = await database(env)
    .select({ replayCount: receipts.replayCount })
    .from(receipts)
    .where(eq(receipts.receiptId, receiptId));
  return row?.replayCount ?? -1;
}

/** Waits until the replayed run has finished (the receipt is neither pending nor processing). */
async function settled(receiptId: string): Promise<string> {
  return eventually(
    async () => {
      const [row] = await database(env)
        .select({ status: receipts.status })
        .from(receipts)
        .where(eq(receipts.receiptId, receiptId));
      return row && !["pending", "processing"].includes(row.status) ? row.status : undefined;
    },
    15_000,
    `${receiptId} to settle`,
  );
}

describe("the replay log", () => {
  it("keeps every replay — when, from which status, through which door — and the timeline shows each one", async () => {
    const receiptId = await seedReceipt({ source: SOURCE, payload: { type: "thing.happened" }, status: "dead" });
    const first = Date.now();
    expect(await replayReceipt(env, receiptId, first, "api")).toMatchObject({
      kind: "replayed",
      previousStatus: "dead",
    });
    expect(await settled(receiptId)).toBe("processed");
    const second = Date.now() + 1;
    expect(await replayReceipt(env, receiptId, second, "dashboard")).toMatchObject({
      kind: "replayed",
      previousStatus: "processed",
    });
    expect(await settled(receiptId)).toBe("processed");

    expect(await logOf(receiptId)).toEqual([
      {
        receiptId,
        replayNumber: 1,
        replayedAt: first,
        previousStatus: "dead",
        requestedBy: "api",
        previousProcessedAt: null,
      },
      {
        receiptId,
        replayNumber: 2,
        replayedAt: second,
        previousStatus: "processed",
        requestedBy: "dashboard",
        // Replay 2 keeps when replay 1's run finished: the processed_at the run it starts will overwrite.
        previousProcessedAt: expect.any(Number),
      },
    ]);

    const detail = (await receiptDetail(database(env), receiptId))!;
    expect(detail.replays).toMatchObject([
      { replayNumber: 1, replayedAt: first, previousStatus: "dead", requestedBy: "api" },
      { replayNumber: 2, replayedAt: second, previousStatus: "processed", requestedBy: "dashboard" },
    ]);
    const replayEntries = timeline(detail).filter((entry) => entry.state === "replay");
    expect(replayEntries).toEqual([
      {
        at: first,
        label: "Replay 1 of 2: enqueued again",
        state: "replay",
        detail: expect.stringMatching(/^was dead, through the admin API, its run finished in \d/),
      },
      {
        at: second,
        label: "Replay 2 of 2: enqueued again",
        state: "replay",
        detail: expect.stringMatching(/^was processed, from the dashboard, its run finished in \d/),
      },
    ]);
    // Each replay sits before the attempt it started.
    const order = timeline(detail).map((entry) => entry.label);
    expect(order.indexOf("Replay 1 of 2: enqueued again")).toBeLessThan(order.indexOf("Replay 2 of 2: enqueued again"));
    expect(order.findIndex((label) => label.startsWith("Attempt"))).toBeGreaterThan(
      order.indexOf("Replay 1 of 2: enqueued again"),
    );
  });

  it("writes nothing for a replay that does not happen", async () => {
    const pending = await seedReceipt({ source: SOURCE, payload: {}, status: "pending" });
    expect((await replayReceipt(env, pending, Date.now(), "api")).kind).toBe("in_flight");
    const expired = await seedReceipt({ source: SOURCE, payload: {}, status: "dead" });
    await database(env).update(receipts).set({ body: null }).where(eq(receipts.receiptId, expired));
    expect((await replayReceipt(env, expired, Date.now(), "api")).kind).toBe("payload_expired");
    expect(await logOf(pending)).toEqual([]);
    expect(await logOf(expired)).toEqual([]);
    expect((await receiptDetail(database(env), expired))!.replays).toEqual([]);
  });

  it("logs exactly the replays that won when several race for one receipt", async () => {
    const receiptId = await seedReceipt({ source: SOURCE, payload: {}, status: "dead" });
    const results = await Promise.all(
      Array.from({ length: 4 }, () => replayReceipt(env, receiptId, Date.now(), "api")),
    );
    const won = results.filter((result) => result.kind === "replayed").length;
    expect(won).toBeGreaterThanOrEqual(1);
    await settled(receiptId);
    const log = await logOf(receiptId);
    expect(log).toHaveLength(won);
    expect(await replayCount(receiptId)).toBe(won);
    expect(log.map((row) => row.replayNumber)).toEqual(Array.from({ length: won }, (_, index) => index + 1));
  });

  it("logs each dead receipt a bulk replay takes, and no other", async () => {
    const source = "proc-forward-gone";
    const received = Date.parse("2026-10-20T00:00:00Z");
    const ids = [];
    for (let index = 0; index < 3; index++)
      ids.push(await seedReceipt({ source, payload: {}, status: "dead", receivedAt: received + index }));
    const bystander = await seedReceipt({ source, payload: {}, status: "processed", receivedAt: received + 5 });
    const now = Date.now();
    const page = await replayDeadReceipts(
      env,
      { source, receivedFrom: received, receivedBefore: received + 10, limit: 2 },
      now,
      "api",
    );
    expect(page).toMatchObject({ replayed: 2, more: true });
    for (const id of page.receiptIds)
      expect(await logOf(id)).toEqual([
        {
          receiptId: id,
          replayNumber: 1,
          replayedAt: now,
          previousStatus: "dead",
          requestedBy: "api",
          previousProcessedAt: null,
        },
      ]);
    const untouched = ids.filter((id) => !page.receiptIds.includes(id));
    expect(untouched).toHaveLength(1);
    for (const id of [...untouched, bystander]) expect(await logOf(id)).toEqual([]);
  });

  it("is shown by the admin API and records a replay asked for there", async () => {
    const receiptId = await seedReceipt({ source: SOURCE, payload: {}, status: "dead" });
    expect((await adminPost(`/admin/api/receipts/${receiptId}/replay`, {})).status).toBe(202);
    await settled(receiptId);
    const detail = (await (await adminGet(`/admin/api/receipts/${receiptId}`)).json()) as { replays: unknown[] };
    expect(detail.replays).toEqual([
      {
        replayNumber: 1,
        replayedAt: expect.any(Number),
        previousStatus: "dead",
        requestedBy: "api",
        // Its run processed the receipt: when, and how long after the replay (src/db/receipt-runs.ts).
        finishedAt: expect.any(Number),
        durationMs: expect.any(Number),
      },
    ]);
  });

  it("a receipt replayed before the log existed still shows its latest replay", async () => {
    const receiptId = await seedReceipt({ source: SOURCE, payload: {}, status: "processed" });
    await database(env)
      .update(receipts)
      .set({ replayCount: 3, replayedAt: 1_790_000_000_000 })
      .where(eq(receipts.receiptId, receiptId));
    expect((await receiptDetail(database(env), receiptId))!.replays).toEqual([
      {
        replayNumber: 3,
        replayedAt: 1_790_000_000_000,
        previousStatus: null,
        requestedBy: null,
        finishedAt: null,
        durationMs: null,
      },
    ]);
  });

  it("leaves with its receipt when retention deletes the key", async () => {
    const config = loadSources(env).get(SOURCE)!;
    const now = Date.now();
    const old = await seedReceipt({
      source: SOURCE,
      payload: {},
      status: "processed",
      receivedAt: now - config.dedupeRetentionMs - 86_400_000,
    });
    const kept = await seedReceipt({ source: SOURCE, payload: {}, status: "processed", receivedAt: now - 86_400_000 });
    await database(env)
      .insert(replays)
      .values([
        { receiptId: old, replayNumber: 1, replayedAt: now - 1000, previousStatus: "dead", requestedBy: "api" },
        { receiptId: kept, replayNumber: 1, replayedAt: now - 1000, previousStatus: "dead", requestedBy: "dashboard" },
      ]);
    const counts = await applyRetention(env, [config], now);
    expect(counts.keysExpired).toBeGreaterThanOrEqual(1);
    expect(await logOf(old)).toEqual([]);
    expect(await logOf(kept)).toHaveLength(1);
  });
});
