import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DASHBOARD_ORIGIN, dashboardPage, dashboardSession, seedReceipt, uniqueSource } from "./support";

/**
 * The dashboard's dead letters page lists a further route's dead delivery — its receipt's own delivery processed, so
 * no receipt is dead — with its route, and its Replay button replays that route's delivery alone.
 */
const FURTHER_ROUTE = "second-destination";

async function furtherDelivery(receiptId: string) {
  return env.DB.prepare("SELECT status, replay_count AS replayCount FROM deliveries WHERE receipt_id = ? AND route = ?")
    .bind(receiptId, FURTHER_ROUTE)
    .first<{ status: string; replayCount: number }>();
}

describe("dashboard: dead deliveries of further routes", () => {
  it("lists one with its route, and replays that route's delivery from the list", async () => {
    const source = uniqueSource("dash-further");
    const receiptId = await seedReceipt({
      source,
      receivedAt: Date.now() - 60_000,
      status: "processed",
      route: "first-destination",
      body: Buffer.from('{"kept":true}'),
    });
    await env.DB.prepare(
      "INSERT INTO deliveries (receipt_id, route, status, attempts, last_error) VALUES (?, ?, 'dead', 5, 'kept failing')",
    )
      .bind(receiptId, FURTHER_ROUTE)
      .run();
    const cookie = await dashboardSession();

    const listed = await dashboardPage(`/admin/dead?source=${source}`, { headers: { cookie } });
    expect(listed.status).toBe(200);
    const html = await listed.text();
    const row = html.match(new RegExp(`<tr data-receipt="${receiptId}" data-route="${FURTHER_ROUTE}">.*?</tr>`, "s"));
    expect(row, "the further route's dead delivery has a row").not.toBeNull();
    expect(row![0]).toContain("kept failing");
    const action = `/admin/receipts/${receiptId}/routes/${FURTHER_ROUTE}/replay`;
    expect(row![0]).toContain(`action="${action}"`);

    const replayed = await dashboardPage(action, {
      method: "POST",
      body: new URLSearchParams(),
      headers: { cookie, origin: DASHBOARD_ORIGIN, "content-type": "application/x-www-form-urlencoded" },
    });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get("location")).toBe("/admin/dead");
    expect(replayed.headers.getSetCookie().join(";")).toContain("admin_flash=");
    // Reset and sent again: its replay is counted (whatever the consumer makes of it next).
    expect(await furtherDelivery(receiptId)).toMatchObject({ replayCount: 1 });
    // The receipt's own delivery did not run again.
    const own = await env.DB.prepare("SELECT status, replay_count AS replayCount FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first();
    expect(own).toEqual({ status: "processed", replayCount: 0 });
  });
});
