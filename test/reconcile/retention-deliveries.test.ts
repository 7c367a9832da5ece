import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { claimEvent } from "../../src/claims/claim-event";
import { utf8Bytes } from "../../src/crypto/encoding";
import { database } from "../../src/db/client";
import { pageOf } from "../../src/reconcile/retention";
import { deadDeliveryBodiesPage } from "../../src/reconcile/retention-held";
import { loadSources } from "../../src/sources/registry";
import { waitForStatus } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, cronUntil, receipt, unique } from "./support";

/**
 * One rule for every delivery of a receipt: retention keeps a receipt's body and key while ANY of its deliveries is
 * unfinished, and its body for dead-letter retention while any is dead — whether that delivery is the one the
 * receipt row carries or a further route's row in `deliveries`.
 */
const SOURCE = "reconcile-retention";
const DAY = 86_400_000;
const FURTHER_ROUTE = "second-destination";

async function receivedAgo(eventKey: string, ageMs: number, now: number) {
  const source = loadSources(env).get(SOURCE)!;
  await claimEvent(env, {
    source,
    identity: {
      eventKey,
      eventKeyOrigin: "provider-id",
      eventKeySigned: true,
      eventType: "thing.happened",
      subjectId: null,
      version: null,
      occurredAt: null,
    },
    rawBody: utf8Bytes(JSON.stringify({ type: "thing.happened", data: { eventKey } })),
    keptHeaders: { "content-type": "application/json" },
    receivedAt: now - ageMs,
    provenance: "live",
  });
  expect(await waitForStatus(SOURCE, eventKey)).toBe("processed");
}

type Unfinished = "pending" | "dead";

/** The two homes of a delivery's state: the receipt row itself, or a further route's row. */
const homes: { home: string; leave: (eventKey: string, status: Unfinished, now: number) => Promise<void> }[] = [
  {
    home: "the receipt's own delivery",
    leave: async (eventKey, status, now) => {
      await env.DB.prepare(
        "UPDATE receipts SET status = ?, next_attempt_at = ?, last_error = ? WHERE source = ? AND event_key = ?",
      )
        .bind(
          status,
          status === "pending" ? now + DAY : null,
          status === "dead" ? "kept failing" : null,
          SOURCE,
          eventKey,
        )
        .run();
    },
  },
  {
    home: "a further delivery",
    leave: async (eventKey, status, now) => {
      // As routing leaves it: the receipt's own route processed, a further route still waiting (a paused route) or dead.
      await env.DB.prepare(
        `INSERT INTO deliveries (receipt_id, route, status, attempts, next_attempt_at, last_error)
         SELECT id, ?, ?, ?, ?, ? FROM receipts WHERE source = ? AND event_key = ?`,
      )
        .bind(
          FURTHER_ROUTE,
          status,
          status === "dead" ? 5 : 0,
          status === "pending" ? now + DAY : null,
          status === "dead" ? "kept failing" : null,
          SOURCE,
          eventKey,
        )
        .run();
    },
  },
];

async function furtherDeliveries(eventKey: string): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT COUNT(*) AS n FROM deliveries WHERE receipt_id IN (SELECT id FROM receipts WHERE source = ? AND event_key = ?)",
  )
    .bind(SOURCE, eventKey)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe.each(homes)("retention holds for $home", { timeout: CRON_TEST_TIMEOUT_MS }, ({ home, leave }) => {
  it("keeps the body of a receipt with an unfinished or dead delivery past payload retention, a dead one's until dead-letter retention", async () => {
    const tag = unique();
    const now = Date.now();
    const finished = `msg_8d_done_${tag}`;
    const waiting = `msg_8d_waiting_${tag}`;
    const dead = `msg_8d_dead_${tag}`;
    const deadPastItsRetention = `msg_25d_dead_${tag}`;
    await receivedAgo(finished, 8 * DAY, now);
    await receivedAgo(waiting, 8 * DAY, now);
    await receivedAgo(dead, 8 * DAY, now);
    await receivedAgo(deadPastItsRetention, 25 * DAY, now);
    await leave(waiting, "pending", now);
    await leave(dead, "dead", now);
    await leave(deadPastItsRetention, "dead", now);

    const runs = await cronUntil(now, async () => (await receipt(SOURCE, finished))?.hasBody === 0);
    expect(runs.every((run) => run.failures === null)).toBe(true);
    expect(await receipt(SOURCE, waiting), home).toMatchObject({ hasBody: 1 });
    expect(await receipt(SOURCE, dead), home).toMatchObject({ hasBody: 1 });
    // Dead-letter retention (20 days for this source) applies to a dead further delivery as to a dead receipt.
    expect(await receipt(SOURCE, deadPastItsRetention), home).toMatchObject({ hasBody: 0 });
  });

  it("keeps the key of a receipt with an unfinished delivery past dedupe retention", async () => {
    const tag = unique();
    const now = Date.now();
    const expired = `msg_36d_done_${tag}`;
    const waiting = `msg_36d_waiting_${tag}`;
    await receivedAgo(expired, 36 * DAY, now);
    await receivedAgo(waiting, 36 * DAY, now);
    await leave(waiting, "pending", now);
    const before = await furtherDeliveries(waiting);

    const runs = await cronUntil(now, async () => (await receipt(SOURCE, expired)) === null);
    expect(runs.every((run) => run.failures === null)).toBe(true);
    expect(await receipt(SOURCE, waiting), home).toMatchObject({ hasBody: 1 });
    expect(await furtherDeliveries(waiting)).toBe(before);
  });
});

describe("retention's reads of further deliveries", () => {
  async function plan(statement: { sql: string; params: unknown[] }): Promise<string[]> {
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${statement.sql}`)
      .bind(...statement.params)
      .all<{ detail: string }>();
    return results.map((row) => row.detail);
  }

  it("seeks each scanned receipt's further deliveries by primary key, and finds dead ones through deliveries_dead", async () => {
    const db = database(env);
    const scan = await plan(pageOf(db, { source: SOURCE, position: "", floor: "7" }).toSQL());
    expect(scan).toContainEqual(expect.stringMatching(/^SEARCH receipts USING PRIMARY KEY \(id>\? AND id<\?\)/));
    expect(scan).toContainEqual(expect.stringMatching(/^SEARCH deliveries USING PRIMARY KEY \(receipt_id=\?\)/));
    expect(scan.some((detail) => detail.startsWith("SCAN"))).toBe(false);
    const held = await plan(deadDeliveryBodiesPage(db, JSON.stringify([{ source: SOURCE, floor: "7" }])).toSQL());
    expect(held).toContainEqual(expect.stringMatching(/^SCAN d USING (COVERING )?INDEX deliveries_dead/));
    expect(held).toContainEqual(expect.stringMatching(/^SEARCH r USING PRIMARY KEY \(id=\?\)/));
    expect(held.some((detail) => detail.includes("receipts_source_event_key"))).toBe(false);
  });
});
