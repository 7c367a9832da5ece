import { describe, expect, it } from "vitest";
import { adminGet, seedReceipt, uniqueSource } from "./support";

/**
 * GET /admin/api/receipts?changedSince=…: receipts of any age in the window that changed since a cursor, which
 * paging by id (newest first) never shows a live tail once they are off its first page.
 */

type ChangesAnswer = { receipts: { receiptId: string; status: string; changedAt: number }[]; changesCursor: string; more: boolean };

async function changes(query: Record<string, string>): Promise<ChangesAnswer> {
  const response = await adminGet(`/admin/api/receipts?${new URLSearchParams(query)}`);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json();
}

const HOUR = 3_600_000;

describe("receipts changed since a cursor", () => {
  it("finds older receipts that changed since the cursor — finished, replayed, retried, dismissed — and nothing else", async () => {
    const source = uniqueSource("changes");
    const now = Date.now();
    const since = now - 60_000;
    const processedLately = await seedReceipt({ source, receivedAt: now - 2 * HOUR, relayedAt: now - 2 * HOUR, status: "processed", processedAt: now - 10_000 });
    const replayedLately = await seedReceipt({ source, receivedAt: now - 3 * HOUR, relayedAt: now - 3 * HOUR, status: "pending", processedAt: now - 3 * HOUR, replayCount: 1, replayedAt: now - 5_000 });
    const retriedLately = await seedReceipt({ source, receivedAt: now - 4 * HOUR, relayedAt: now - 4 * HOUR, status: "pending", attempts: 2, attemptStartedAt: now - 20_000, attemptDurationMs: 900, nextAttemptAt: now + 60_000 });
    const dismissedLately = await seedReceipt({ source, receivedAt: now - 5 * HOUR, relayedAt: now - 5 * HOUR, status: "dismissed", dismissedAt: now - 1_000 });
    const relayedLately = await seedReceipt({ source, receivedAt: now - 30_000, relayedAt: now - 29_000, status: "pending" });
    await seedReceipt({ source, receivedAt: now - 2 * HOUR, relayedAt: now - 2 * HOUR, status: "processed", processedAt: now - 2 * HOUR + 50 });
    const answer = await changes({ changedSince: String(since), window: "6h", source });
    expect(answer.receipts.map((receipt) => receipt.receiptId)).toEqual([relayedLately, retriedLately, processedLately, replayedLately, dismissedLately]);
    expect(answer.receipts.map((receipt) => receipt.changedAt)).toEqual([now - 29_000, now - 19_100, now - 10_000, now - 5_000, now - 1_000]);
    expect(answer.more).toBe(false);
    // The next cursor trails the read a little (a change decided before it may commit after it), never before `since`.
    expect(Number(answer.changesCursor)).toBeGreaterThanOrEqual(since);
    expect(Number(answer.changesCursor)).toBeLessThanOrEqual(Date.now() - 29_000);

    // The window bounds what is read: receipts received before it are not looked at.
    expect((await changes({ changedSince: String(since), window: "150m", source })).receipts.map((receipt) => receipt.receiptId)).toEqual([
      relayedLately,
      processedLately,
    ]);
    // Filters apply to where the receipt is now.
    expect((await changes({ changedSince: String(since), window: "6h", source, status: "pending" })).receipts.map((receipt) => receipt.receiptId)).toEqual([
      relayedLately,
      retriedLately,
      replayedLately,
    ]);
    expect((await changes({ changedSince: String(since), window: "6h", source: uniqueSource("nobody") })).receipts).toEqual([]);
  });

  it("pages through more changes than a page holds without skipping or repeating, ties included", async () => {
    const source = uniqueSource("changes-paged");
    const now = Date.now();
    const ids: string[] = [];
    // Five receipts, three finished in the same millisecond.
    for (const [index, finished] of [now - 4_000, now - 3_000, now - 3_000, now - 3_000, now - 1_000].entries()) {
      ids.push(await seedReceipt({ source, receivedAt: now - HOUR + index, relayedAt: now - HOUR + index, status: "processed", processedAt: finished }));
    }
    const seen: string[] = [];
    let cursor = String(now - 10_000);
    for (let call = 0; call < 10; call++) {
      const page = await changes({ changedSince: cursor, window: "2h", source, limit: "2" });
      seen.push(...page.receipts.map((receipt) => receipt.receiptId));
      cursor = page.changesCursor;
      if (!page.more) break;
    }
    expect(seen).toEqual(ids);
  });

  it("refuses what it cannot honour, naming the parameter", async () => {
    const refused = async (query: string) => {
      const response = await adminGet(`/admin/api/receipts?${query}`);
      expect(response.status).toBe(400);
      return ((await response.json()) as { error: { message: string } }).error.message;
    };
    expect(await refused("changedSince=yesterday")).toMatch(/"changedSince"/);
    expect(await refused(`changedSince=${Date.now()}&window=30d`)).toMatch(/"window" must be .* at most 7d/);
    expect(await refused(`changedSince=${Date.now()}&before=01KB0000000000000000000000`)).toMatch(/"before" cannot be combined with changedSince/);
    expect(await refused(`changedSince=${Date.now()}&status=finished`)).toMatch(/"status"/);
    expect(await refused("window=1h")).toMatch(/"window" only goes with changedSince/);
  });
});
