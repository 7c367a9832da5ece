import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { receiptChanges } from "../../src/admin/receipts/lists";
import {
  type ChangedReceipt,
  changesPage,
  parseChangesQuery,
  SETTLE_MS,
} from "../../src/admin/receipts/receipt-changes";
import { database } from "../../src/db/client";
import { deliveries, receipts } from "../../src/db/schema";
import worker from "../../src/index";
import type { QueuedWork } from "../../src/model/work-message";
import { adminGet, adminPost, seedReceipt, uniqueSource } from "./support";

/** A changes cursor as the route reads it. */
const cursorOf = (changedSince: string) => {
  const { since, afterId } = parseChangesQuery({ changedSince });
  return { since, afterId };
};

/**
 * GET /admin/api/receipts?changedSince=…: receipts of any age in the window that changed since a cursor, which
 * paging by id (newest first) never shows a live tail once they are off its first page.
 */

type ChangesAnswer = {
  receipts: { receiptId: string; status: string; changedAt: number }[];
  changesCursor: string;
  more: boolean;
};

async function changes(query: Record<string, string>): Promise<ChangesAnswer> {
  const response = await adminGet(`/admin/api/receipts?${new URLSearchParams(query)}`);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json();
}

const HOUR = 3_600_000;

/** Routes first, second and third (test/fixtures/sources/fanout.json): a receipt's further deliveries can be dismissed. */
const FANOUT_SOURCE = "routing-fanout-rows";

async function furtherStatus(receiptId: string): Promise<string | undefined> {
  const [row] = await database(env)
    .select({ status: deliveries.status })
    .from(deliveries)
    .where(and(eq(deliveries.receiptId, receiptId), eq(deliveries.route, "second")));
  return row?.status;
}

describe("receipts changed since a cursor", () => {
  it("finds older receipts that changed since the cursor — finished, replayed, retried, dismissed — and nothing else", async () => {
    const source = uniqueSource("changes");
    const now = Date.now();
    const since = now - 60_000;
    const processedLately = await seedReceipt({
      source,
      receivedAt: now - 2 * HOUR,
      relayedAt: now - 2 * HOUR,
      status: "processed",
      processedAt: now - 10_000,
    });
    const replayedLately = await seedReceipt({
      source,
      receivedAt: now - 3 * HOUR,
      relayedAt: now - 3 * HOUR,
      status: "pending",
      processedAt: now - 3 * HOUR,
      replayCount: 1,
      replayedAt: now - 5_000,
    });
    const retriedLately = await seedReceipt({
      source,
      receivedAt: now - 4 * HOUR,
      relayedAt: now - 4 * HOUR,
      status: "pending",
      attempts: 2,
      attemptStartedAt: now - 20_000,
      attemptDurationMs: 900,
      nextAttemptAt: now + 60_000,
    });
    const dismissedLately = await seedReceipt({
      source,
      receivedAt: now - 5 * HOUR,
      relayedAt: now - 5 * HOUR,
      status: "dismissed",
      dismissedAt: now - 1_000,
    });
    const relayedLately = await seedReceipt({
      source,
      receivedAt: now - 30_000,
      relayedAt: now - 29_000,
      status: "pending",
    });
    await seedReceipt({
      source,
      receivedAt: now - 2 * HOUR,
      relayedAt: now - 2 * HOUR,
      status: "processed",
      processedAt: now - 2 * HOUR + 50,
    });
    const answer = await changes({ changedSince: String(since), window: "6h", source });
    expect(answer.receipts.map((receipt) => receipt.receiptId)).toEqual([
      relayedLately,
      retriedLately,
      processedLately,
      replayedLately,
      dismissedLately,
    ]);
    expect(answer.receipts.map((receipt) => receipt.changedAt)).toEqual([
      now - 29_000,
      now - 19_100,
      now - 10_000,
      now - 5_000,
      now - 1_000,
    ]);
    expect(answer.more).toBe(false);
    // The next cursor trails the read a little (a change decided before it may commit after it), never before `since`.
    expect(Number(answer.changesCursor)).toBeGreaterThanOrEqual(since);
    expect(Number(answer.changesCursor)).toBeLessThanOrEqual(Date.now() - 29_000);

    // The window bounds what is read: receipts received before it are not looked at.
    expect(
      (await changes({ changedSince: String(since), window: "150m", source })).receipts.map(
        (receipt) => receipt.receiptId,
      ),
    ).toEqual([relayedLately, processedLately]);
    // Filters apply to where the receipt is now.
    expect(
      (await changes({ changedSince: String(since), window: "6h", source, status: "pending" })).receipts.map(
        (receipt) => receipt.receiptId,
      ),
    ).toEqual([relayedLately, retriedLately, replayedLately]);
    expect(
      (await changes({ changedSince: String(since), window: "6h", source: uniqueSource("nobody") })).receipts,
    ).toEqual([]);
  });

  it("lists a receipt when a further route's delivery changes: dead at its attempt's end, processed after a replay", async () => {
    const source = uniqueSource("changes-further");
    const now = Date.now();
    const since = now - 60_000;
    // Each receipt's own delivery finished long ago; only its further delivery (routes 2–16) changed lately.
    const ownFinishedLongAgo = (hoursAgo: number) =>
      seedReceipt({
        source,
        receivedAt: now - hoursAgo * HOUR,
        relayedAt: now - hoursAgo * HOUR,
        status: "processed",
        processedAt: now - hoursAgo * HOUR + 100,
      });
    const further = (receiptId: string, columns: Record<string, string | number>) =>
      env.DB.prepare(
        `INSERT INTO deliveries (receipt_id, route, ${Object.keys(columns).join(", ")})
         VALUES (?, 'second-destination', ${Object.keys(columns)
           .map(() => "?")
           .join(", ")})`,
      )
        .bind(receiptId, ...Object.values(columns))
        .run();
    const diedLately = await ownFinishedLongAgo(2);
    await further(diedLately, {
      status: "dead",
      attempts: 5,
      attempt_started_at: now - 12_000,
      attempt_duration_ms: 2_000,
    });
    const replayedAndProcessed = await ownFinishedLongAgo(3);
    await further(replayedAndProcessed, {
      status: "processed",
      attempts: 1,
      replay_count: 1,
      replayed_at: now - 8_000,
      attempt_started_at: now - 7_500,
      attempt_duration_ms: 500,
      processed_at: now - 6_000,
    });
    const quietSince = await ownFinishedLongAgo(4);
    await further(quietSince, { status: "dead", attempts: 5, attempt_started_at: now - 2 * HOUR });

    const answer = await changes({ changedSince: String(since), window: "6h", source });
    expect(answer.receipts.map(({ receiptId, status, changedAt }) => ({ receiptId, status, changedAt }))).toEqual([
      { receiptId: diedLately, status: "processed", changedAt: now - 10_000 },
      { receiptId: replayedAndProcessed, status: "processed", changedAt: now - 6_000 },
    ]);
  });

  it("lists a receipt when the dead-letter queue gives up on its further delivery, and when an operator dismisses or restores that delivery", async () => {
    const now = Date.now();
    // Its own route long processed; its further delivery to `second` leased and attempted an hour ago, then stuck.
    const receiptId = await seedReceipt({
      source: FANOUT_SOURCE,
      receivedAt: now - 2 * HOUR,
      relayedAt: now - 2 * HOUR,
      status: "processed",
      processedAt: now - 2 * HOUR + 100,
      route: "first",
      filteredRoutes: "",
      attempts: 1,
    });
    await database(env)
      .insert(deliveries)
      .values({ receiptId, route: "second", status: "processing", attempts: 3, attemptStartedAt: now - HOUR });
    // When the feed lists the receipt, asked for changes at or after `since`.
    const listedSince = async (since: number) =>
      (await changes({ changedSince: String(since), window: "6h", source: FANOUT_SOURCE, limit: "200" })).receipts
        .filter((receipt) => receipt.receiptId === receiptId)
        .map(({ changedAt }) => changedAt);

    const beforeDeadLetter = Date.now();
    expect(await listedSince(beforeDeadLetter)).toEqual([]);
    // The work queue gave up on the message that carried this delivery to `second`: the dead-letter consumer.
    const batch = createMessageBatch<QueuedWork>("webhook-work-dead", [
      {
        id: `msg_${receiptId}`,
        timestamp: Date.now(),
        attempts: 5,
        body: { source: FANOUT_SOURCE, database: "DB", receiptIds: [receiptId], route: "second" },
      },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual([`msg_${receiptId}`]);
    expect(await furtherStatus(receiptId)).toBe("dead");
    let [lastChange] = await listedSince(beforeDeadLetter);
    expect(lastChange).toBeGreaterThanOrEqual(beforeDeadLetter);

    for (const [action, status] of [
      ["dismiss", "dismissed"],
      ["restore", "dead"],
    ] as const) {
      // A tail that has seen the last change asks from just after it: nothing, until the operator acts.
      const cursor = lastChange! + 1;
      expect(await listedSince(cursor)).toEqual([]);
      const moved = await adminPost(`/admin/api/dead/${action}`, { receiptIds: [receiptId], route: "second" });
      expect((await moved.json<{ changed: string[] }>()).changed).toEqual([receiptId]);
      expect(await furtherStatus(receiptId)).toBe(status);
      [lastChange] = await listedSince(cursor);
      expect(lastChange).toBeGreaterThanOrEqual(cursor);
    }
  });

  it("stamps a further delivery's entry into a resting status at one more row written, and its happy path at none", async () => {
    const receiptId = await seedReceipt({ source: uniqueSource("changes-stamp-cost"), receivedAt: Date.now() });
    const leased = (route: string) =>
      env.DB.prepare("INSERT INTO deliveries (receipt_id, route, status) VALUES (?, ?, 'processing')")
        .bind(receiptId, route)
        .run();
    const rowsWritten = async (route: string, status: string) =>
      (
        await env.DB.prepare("UPDATE deliveries SET status = ? WHERE receipt_id = ? AND route = ?")
          .bind(status, receiptId, route)
          .run()
      ).meta.rows_written;
    await leased("delivered");
    await leased("dying");
    // D1 counts an index entry written as a row. Processed: the row alone, no stamp.
    expect(await rowsWritten("delivered", "processed")).toBe(1);
    // Entering dead: the row, its entry in `deliveries_dead`, and the stamp (migrations/0022)...
    expect(await rowsWritten("dying", "dead")).toBe(3);
    // ...which the same update, entering nothing, does not write.
    expect(await rowsWritten("dying", "dead")).toBe(2);
  });

  it("pages through more changes than a page holds without skipping or repeating, ties included", async () => {
    const source = uniqueSource("changes-paged");
    const now = Date.now();
    const ids: string[] = [];
    // Five receipts, three finished in the same millisecond, all longer ago than SETTLE_MS (newer ones are an early
    // look, at the end of a pass: the test below).
    for (const [index, finished] of [now - 44_000, now - 43_000, now - 43_000, now - 43_000, now - 41_000].entries()) {
      ids.push(
        await seedReceipt({
          source,
          receivedAt: now - HOUR + index,
          relayedAt: now - HOUR + index,
          status: "processed",
          processedAt: finished,
        }),
      );
    }
    const seen: string[] = [];
    let cursor = String(now - 50_000);
    for (let call = 0; call < 10; call++) {
      const page = await changes({ changedSince: cursor, window: "2h", source, limit: "2" });
      seen.push(...page.receipts.map((receipt) => receipt.receiptId));
      cursor = page.changesCursor;
      if (!page.more) break;
    }
    expect(seen).toEqual(ids);
  });

  it("lists a change that commits after a read it was stamped before, on a later pass, whether or not the pass paged past its time", async () => {
    const source = uniqueSource("changes-late");
    const T = Date.now();
    const query = { since: T - 10_000, afterId: null, windowMs: 2 * HOUR, source, limit: 2 };
    const finished = (processedAt: number) =>
      seedReceipt({
        source,
        receivedAt: T - HOUR + (processedAt % 1000),
        relayedAt: T - HOUR,
        status: "processed",
        processedAt,
      });
    const early = [await finished(T - 5_000), await finished(T - 4_000), await finished(T - 3_000)];

    /** Follows the cursor from `changedSince` until `more` is false, every call read at `now`. */
    async function pass(changedSince: string, now: number): Promise<{ listed: string[]; cursor: string }> {
      const listed: string[] = [];
      let cursor = changedSince;
      for (let call = 0; call < 10; call++) {
        const answer = await receiptChanges(env, { ...query, ...cursorOf(cursor) }, now);
        listed.push(...answer.receipts.map((receipt) => receipt.receiptId));
        cursor = answer.changesCursor;
        if (!answer.more) return { listed, cursor };
      }
      throw new Error("the pass did not end");
    }

    // A pass read at T, with more changes from the last SETTLE_MS than a page holds.
    const first = await pass(String(query.since), T);
    expect(new Set(first.listed).size).toBe(first.listed.length);
    // Then a change decided at T - 4.5 s (a consumer's clock) commits: after that read, before the last listed one.
    const late = await finished(T - 4_500);
    // The next pass, once everything has settled, lists it, and every change once.
    const second = await pass(first.cursor, T + SETTLE_MS + 10_000);
    expect(second.listed).toEqual([early[0], late, early[1], early[2]]);
    expect(new Set([...first.listed, ...second.listed])).toEqual(new Set([...early, late]));
  });

  it("continues a full page exactly only through settled changes, and says where the early look begins", () => {
    const row = (changedAt: number, receiptId: string) => ({ changedAt, receiptId }) as ChangedReceipt;
    const now = 1_000_000;
    const query = { since: 0, afterId: null, windowMs: HOUR, limit: 2 };
    const settled = [row(now - 50_000, "A"), row(now - 40_000, "B"), row(now - 35_000, "C")];
    expect(changesPage(settled, query, now)).toEqual({
      receipts: settled.slice(0, 2),
      changesCursor: `${now - 40_000}.B`,
      more: true,
      settledBefore: now - SETTLE_MS,
    });
    // The second row is from the last SETTLE_MS: all settled changes are on the page; the cursor stops at the settle line.
    const mixed = [row(now - 50_000, "A"), row(now - 1_000, "B"), row(now - 500, "C")];
    expect(changesPage(mixed, query, now)).toEqual({
      receipts: mixed.slice(0, 2),
      changesCursor: String(now - SETTLE_MS),
      more: false,
      settledBefore: now - SETTLE_MS,
    });
    // A cursor already past the settle line stays where it is, its tie-breaking id included.
    expect(changesPage([row(now - 100, "Z")], { ...query, since: now - 1_000, afterId: "Y" }, now).changesCursor).toBe(
      `${now - 1_000}.Y`,
    );
  });

  it("sees a dismissal undone and a dead verdict that keeps no time of its own: D1 stamps the entry into the status", async () => {
    const source = uniqueSource("changes-entered");
    const now = Date.now();
    const restored = await seedReceipt({
      source,
      receivedAt: now - 2 * HOUR,
      relayedAt: now - 2 * HOUR,
      status: "dismissed",
      dismissedAt: now - HOUR,
    });
    const diedQuietly = await seedReceipt({
      source,
      receivedAt: now - 2 * HOUR + 1,
      relayedAt: now - 2 * HOUR,
      status: "processing",
      attemptStartedAt: now - HOUR,
    });
    const since = Date.now();
    expect(
      (await (await adminPost("/admin/api/dead/restore", { receiptIds: [restored] })).json<{ changed: string[] }>())
        .changed,
    ).toEqual([restored]);
    // The work queue's dead-letter consumer writes the verdict and nothing else.
    await database(env).update(receipts).set({ status: "dead" }).where(eq(receipts.receiptId, diedQuietly));
    const answer = await changes({ changedSince: String(since), window: "6h", source });
    expect(answer.receipts.map((receipt) => [receipt.receiptId, receipt.status])).toEqual([
      [restored, "dead"],
      [diedQuietly, "dead"],
    ]);
  });

  it("refuses what it cannot honour, naming the parameter", async () => {
    const refused = async (query: string) => {
      const response = await adminGet(`/admin/api/receipts?${query}`);
      expect(response.status).toBe(400);
      return ((await response.json()) as { error: { message: string } }).error.message;
    };
    expect(await refused("changedSince=yesterday")).toMatch(/"changedSince"/);
    expect(await refused(`changedSince=${Date.now()}&window=30d`)).toMatch(/"window" must be .* at most 7d/);
    expect(await refused(`changedSince=${Date.now()}&before=01KB0000000000000000000000`)).toMatch(
      /"before" cannot be combined with changedSince/,
    );
    expect(await refused(`changedSince=${Date.now()}&status=finished`)).toMatch(/"status"/);
    expect(await refused("window=1h")).toMatch(/"window" only goes with changedSince/);
  });
});
