import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ulid } from "../../src/lib/ulid";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique, withOnlySources } from "./support";

/**
 * The watch's dead-letters and pending-age alerts count every delivery, whether its state lives in the receipt row
 * (its first route) or in a further route's `deliveries` row: one route dead-lettering every event, or a paused
 * route's backlog, is alerted on like the receipt's own.
 */
const SOURCE = "reconcile-stuck";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);
const HOUR = 3_600_000;
const FURTHER_ROUTE = "second-destination";

/** A receipt whose own delivery is `own`; with `further`, a further route's delivery in that state too. */
async function receiptWith(receivedAt: number, own: string, further: string | null) {
  const receiptId = ulid(receivedAt);
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, payload_sha256, received_at, relayed_at, status, next_attempt_at, attempts)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)`,
  )
    .bind(
      receiptId,
      SOURCE,
      `msg_${unique()}`,
      "0".repeat(64),
      receivedAt,
      receivedAt,
      own,
      own === "pending" ? Date.now() + HOUR : null,
    )
    .run();
  if (further !== null)
    await env.DB.prepare(
      "INSERT INTO deliveries (receipt_id, route, status, attempts, next_attempt_at) VALUES (?, ?, ?, 1, ?)",
    )
      .bind(receiptId, FURTHER_ROUTE, further, further === "pending" ? Date.now() + HOUR : null)
      .run();
}

const homes = [
  { home: "the receipt's own delivery", leave: (at: number, status: string) => receiptWith(at, status, null) },
  { home: "a further delivery", leave: (at: number, status: string) => receiptWith(at, "processed", status) },
];

async function incidents(kind: string) {
  return (
    await env.DB.prepare("SELECT state FROM alerts WHERE source = ? AND kind = ? ORDER BY opened_at")
      .bind(SOURCE, kind)
      .all<{ state: string }>()
  ).results;
}

describe.each(homes)("the watch counts $home", { timeout: CRON_TEST_TIMEOUT_MS }, ({ leave }) => {
  it("opens a dead-letters incident when it dies, and a pending-age one when it waits too long", async () => {
    const now = Date.now();
    await cronRun(now, CRON_ENV); // the baseline
    const openBefore = {
      dead: (await incidents("dead-letters")).filter((row) => row.state === "open").length,
      pending: (await incidents("pending-age")).filter((row) => row.state === "open").length,
    };
    expect(openBefore).toEqual({ dead: 0, pending: 0 });
    await leave(now - HOUR, "dead");
    // Received two hours ago and still waiting: older than alert_pending_after (1 h).
    await leave(now - 2 * HOUR, "pending");
    await cronRun(now + 60_000, CRON_ENV);
    expect(await incidents("dead-letters")).toContainEqual({ state: "open" });
    expect(await incidents("pending-age")).toContainEqual({ state: "open" });

    // Dealt with: both resolve.
    await env.DB.prepare("UPDATE receipts SET status = 'processed' WHERE source = ? AND status IN ('dead', 'pending')")
      .bind(SOURCE)
      .run();
    await env.DB.prepare(
      "UPDATE deliveries SET status = 'processed' WHERE receipt_id IN (SELECT id FROM receipts WHERE source = ?)",
    )
      .bind(SOURCE)
      .run();
    await cronRun(now + 120_000, CRON_ENV);
    expect((await incidents("dead-letters")).every((row) => row.state === "resolved")).toBe(true);
    expect((await incidents("pending-age")).every((row) => row.state === "resolved")).toBe(true);
  });
});
