import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { ReceiptStatus } from "../../src/admin/receipts/filters";
import { database } from "../../src/db/client";
import { receipts } from "../../src/db/schema";
import { adminGet, adminPost, seedReceipt, uniqueSource } from "./support";

/**
 * A status-filtered list (/dead, ?status=…) pages by receipt id, but the filter is on something that changes: a
 * receipt the reader has passed can enter the status after its place was read. For the resting statuses (dead,
 * dismissed, stale, skipped) a later page catches up on it, as it does on late relays; a receipt that leaves the
 * status before its place is read is not listed, and none that keeps its status is listed twice.
 */

type Page = { receipts: { receiptId: string; status: string }[]; nextCursor: string | null };

async function page(path: string): Promise<Page> {
  const response = await adminGet(path);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json<Page>();
}

describe("paging a status-filtered list while statuses change", () => {
  it("lists a receipt that turns dead behind the reader (restored, or a dead verdict) on a later page, once", async () => {
    const source = uniqueSource("status-paging");
    const t = Date.now() - 120_000;
    const at = (n: number, status: ReceiptStatus) =>
      seedReceipt({
        source,
        receivedAt: t + n * 1_000,
        relayedAt: t + n * 1_000 + 500,
        status,
        ...(status === "dismissed" ? { dismissedAt: t + n * 1_000 + 600 } : {}),
      });
    const leavesAhead = await at(0, "dead");
    const restoredAhead = await at(1, "dismissed");
    const dead2 = await at(2, "dead");
    const restoredBehind = await at(3, "dismissed");
    const diesBehind = await at(4, "processing");
    const dead5 = await at(5, "dead");
    const diesBehindToo = await at(6, "pending");
    const dead7 = await at(7, "dead");

    const first = await page(`/admin/api/dead?source=${source}&limit=3`);
    expect(first.receipts.map((receipt) => receipt.receiptId)).toEqual([dead7, dead5, dead2]);

    // Behind the reader (ids above dead2): one restored through the route, two given a dead verdict as the consumer
    // writes it. Ahead of it: one restored (listed in its place), one dismissed (no longer dead when its place is read).
    expect(
      (
        await (
          await adminPost("/admin/api/dead/restore", { receiptIds: [restoredBehind, restoredAhead] })
        ).json<{ changed: string[] }>()
      ).changed,
    ).toHaveLength(2);
    for (const receiptId of [diesBehind, diesBehindToo])
      await database(env)
        .update(receipts)
        .set({ status: "dead", lastError: "gave up" })
        .where(eq(receipts.receiptId, receiptId));
    expect(
      (await (await adminPost("/admin/api/dead/dismiss", { receiptIds: [leavesAhead] })).json<{ changed: string[] }>())
        .changed,
    ).toEqual([leavesAhead]);

    const listed = first.receipts.map((receipt) => receipt.receiptId);
    let cursor = first.nextCursor;
    for (let pages = 0; cursor !== null && pages < 10; pages++) {
      // One a page, so the catch-up (three receipts) takes more than a page and resumes.
      const next = await page(`/admin/api/dead?source=${source}&limit=1&before=${encodeURIComponent(cursor)}`);
      listed.push(...next.receipts.map((receipt) => receipt.receiptId));
      expect(next.receipts.every((receipt) => receipt.status === "dead")).toBe(true);
      cursor = next.nextCursor;
    }
    expect(cursor).toBeNull();
    expect(listed.slice(3, 6)).toEqual([restoredBehind, diesBehind, diesBehindToo]);
    expect([...listed].sort()).toEqual(
      [dead7, dead5, dead2, restoredBehind, diesBehind, diesBehindToo, restoredAhead].sort(),
    );
    expect(new Set(listed).size).toBe(listed.length);
  });

  it("costs the happy path nothing: only entering a resting status writes the entry time and its index row", async () => {
    const source = uniqueSource("status-cost");
    const receiptId = await seedReceipt({ source, receivedAt: Date.now() - 60_000, relayedAt: Date.now() - 59_000 });
    const written = async (status: string) =>
      (await env.DB.prepare("UPDATE receipts SET status = ? WHERE id = ?").bind(status, receiptId).run()).meta
        .rows_written;
    const processing = await written("processing");
    const processed = await written("processed");
    expect(processed).toBe(processing);
    // Stale has no index of its own (dead has receipts_dead): what it costs more is the entry time and its index row.
    expect(await written("stale")).toBeGreaterThan(processed);
  });
});
