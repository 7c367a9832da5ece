import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { SourceStats } from "../../src/admin/stats/source-stats";
import { adminGet, seedReceipt, uniqueSource } from "./support";

/**
 * A source whose receipts all delivered on their first route, but whose further route dead-lettered one and keeps
 * another waiting, is failing in the stats (and so on the dashboard's overview and /admin/api/stats): the dead
 * further delivery is a dead letter, the waiting one backlog aged from its receipt's arrival.
 */
const FURTHER_ROUTE = "second-destination";

async function furtherDelivery(receiptId: string, status: string) {
  await env.DB.prepare(
    "INSERT INTO deliveries (receipt_id, route, status, attempts, next_attempt_at) VALUES (?, ?, ?, 1, ?)",
  )
    .bind(receiptId, FURTHER_ROUTE, status, status === "pending" ? Date.now() + 3_600_000 : null)
    .run();
}

async function statsFor(source: string): Promise<SourceStats> {
  const response = await adminGet(`/admin/api/stats?source=${source}&window=1h`);
  expect(response.status).toBe(200);
  return (await response.json<{ sources: SourceStats[] }>()).sources[0]!;
}

describe("per-source stats count further deliveries", () => {
  it("counts a dead further delivery in deadTotal and ages the backlog from a waiting one's receipt", async () => {
    const source = uniqueSource("further-stats");
    const now = Date.now();
    const deadOne = await seedReceipt({ source, receivedAt: now - 60_000, status: "processed" });
    await furtherDelivery(deadOne, "dead");
    // Received three hours ago, outside the window: its own delivery finished, its further one still waits.
    const waitingOne = await seedReceipt({ source, receivedAt: now - 3 * 3_600_000, status: "processed" });
    await furtherDelivery(waitingOne, "pending");
    await seedReceipt({ source, receivedAt: now - 30_000, status: "dead" });

    const stats = await statsFor(source);
    expect(stats).toMatchObject({ deadTotal: 2, oldestPendingReceivedAt: now - 3 * 3_600_000, health: "failing" });
    expect(stats.healthReasons).toEqual([
      { reason: "dead-letters", count: 2, message: expect.stringMatching(/^2 dead letters/) },
      { reason: "backlog", ageMs: expect.any(Number), message: expect.stringMatching(/delivery has waited 180 min/) },
    ]);

    // Only the source's own: another source's view is unchanged.
    const other = uniqueSource("further-stats-other");
    await seedReceipt({ source: other, receivedAt: now - 10_000, status: "processed" });
    expect(await statsFor(other)).toMatchObject({ deadTotal: 0, oldestPendingReceivedAt: null, health: "ok" });
  });

  it("reports every source's dead further deliveries in the all-sources report", async () => {
    const source = uniqueSource("further-stats-all");
    const receiptId = await seedReceipt({ source, receivedAt: Date.now() - 5_000, status: "processed" });
    await furtherDelivery(receiptId, "dead");
    const response = await adminGet("/admin/api/stats?window=1h");
    const report = await response.json<{ sources: SourceStats[] }>();
    expect(report.sources.find((row) => row.source === source)).toMatchObject({ deadTotal: 1, health: "failing" });
  });
});
