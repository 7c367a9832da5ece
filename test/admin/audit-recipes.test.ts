import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import auditDoc from "../../docs/audit.md?raw";
import { database } from "../../src/db/client";
import { quarantine, replays } from "../../src/db/schema";
import { seedAttempt, seedReceipt } from "./support";

/**
 * Runs every SQL recipe in docs/audit.md, exactly as the document prints it, against the real local D1 and checks
 * the answers. The recipes' example values (source "billing", key "evt_1001", day 2026-11-01) are what this file
 * seeds; no other test writes the "billing" source.
 */

function recipes(markdown: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const match of markdown.matchAll(/<!-- recipe: ([a-z0-9-]+) -->\s*```sql\n([\s\S]*?)```/g)) {
    found.set(match[1]!, match[2]!.trim());
  }
  return found;
}

const RECIPES = recipes(auditDoc);

async function run<T>(name: string): Promise<T[]> {
  const text = RECIPES.get(name);
  if (!text) throw new Error(`docs/audit.md has no recipe named ${name}`);
  const { results } = await env.DB.prepare(text).all<T>();
  return results;
}

const at = (iso: string) => Date.parse(iso);

beforeAll(async () => {
  // The life of evt_1001: one 503, then processed on the retry; later a copy with different bytes; then replayed
  // twice (through the API, then the dashboard), each run finding the outcome committed and applying nothing.
  const t = at("2026-11-01T10:00:00Z");
  const receiptId = await seedReceipt({
    source: "billing",
    eventKey: "evt_1001",
    eventType: "invoice.paid",
    receivedAt: t,
    relayedAt: t + 20,
    status: "processed",
    attempts: 2,
    leaseGeneration: 2,
    processedAt: t + 31_100,
    committedAt: t + 31_100,
    replayCount: 2,
    replayedAt: t + 180_000,
    // The successful attempt lives in the receipt row; only the failed one has an attempts row.
    attemptStartedAt: t + 31_000,
    attemptDurationMs: 100,
    attemptHttpStatus: 200,
  });
  await seedAttempt({
    receiptId,
    attemptNumber: 1,
    startedAt: t + 1000,
    finishedAt: t + 1200,
    outcome: "retry",
    httpStatus: 503,
    error: "destination answered 503",
    durationMs: 200,
  });
  await database(env)
    .insert(replays)
    .values([
      { receiptId, replayNumber: 1, replayedAt: t + 120_000, previousStatus: "processed", requestedBy: "api" },
      { receiptId, replayNumber: 2, replayedAt: t + 180_000, previousStatus: "processed", requestedBy: "dashboard" },
    ]);
  const nothingApplied = "already committed by an earlier run; nothing applied";
  await seedAttempt({
    receiptId,
    attemptNumber: 3,
    startedAt: t + 120_050,
    finishedAt: t + 120_060,
    outcome: "duplicate",
    error: nothingApplied,
    durationMs: 10,
  });
  await seedAttempt({
    receiptId,
    attemptNumber: 4,
    startedAt: t + 180_050,
    finishedAt: t + 180_060,
    outcome: "duplicate",
    error: nothingApplied,
    durationMs: 10,
  });
  await database(env)
    .insert(quarantine)
    .values({
      quarantineId: "01KQUARANTINE0000000000001",
      source: "billing",
      eventKey: "evt_1001",
      reason: "payload-mismatch",
      originalReceiptId: receiptId,
      payloadSha256: "ab".repeat(32),
      receivedAt: t + 60_000,
    });

  // Dead letters: one died after the cut-off, one before it, one the queue gave up on without an attempt row.
  const diedAfter = await seedReceipt({
    source: "billing",
    eventKey: "evt_2001",
    receivedAt: at("2026-11-01T10:30:00Z"),
    status: "dead",
    attempts: 1,
    lastError: "data.amount must be an integer",
  });
  await seedAttempt({
    receiptId: diedAfter,
    attemptNumber: 1,
    startedAt: at("2026-11-02T00:00:00Z"),
    finishedAt: at("2026-11-02T00:00:01Z"),
    outcome: "dead",
    durationMs: 1000,
  });
  const diedBefore = await seedReceipt({
    source: "billing",
    eventKey: "evt_2002",
    receivedAt: at("2026-10-30T10:00:00Z"),
    status: "dead",
    attempts: 1,
    lastError: "old",
  });
  await seedAttempt({
    receiptId: diedBefore,
    attemptNumber: 1,
    startedAt: at("2026-10-31T10:00:00Z"),
    finishedAt: at("2026-10-31T10:00:01Z"),
    outcome: "dead",
    durationMs: 1000,
  });
  await seedReceipt({
    source: "billing",
    eventKey: "evt_2003",
    receivedAt: at("2026-11-03T12:15:00Z"),
    status: "dead",
    lastError: "work queue gave up after 100 deliveries",
  });

  // Waiting work, reconciled and replayed receipts.
  await seedReceipt({
    source: "billing",
    eventKey: "evt_3001",
    receivedAt: at("2026-11-04T08:00:00Z"),
    status: "pending",
  });
  await seedReceipt({
    source: "billing",
    eventKey: "evt_3002",
    receivedAt: at("2026-11-04T09:00:00Z"),
    status: "processing",
    attempts: 1,
  });
  await seedReceipt({
    source: "billing",
    eventKey: "evt_4001",
    receivedAt: at("2026-11-05T06:00:00Z"),
    occurredAt: at("2026-11-04T23:00:00Z"),
    status: "processed",
    provenance: "reconciled",
    eventType: "invoice.created",
  });
  await seedReceipt({
    source: "billing",
    eventKey: "evt_5001",
    receivedAt: at("2026-11-05T14:20:00Z"),
    status: "processed",
    replayCount: 1,
    replayedAt: at("2026-11-06T09:00:00Z"),
  });
  // Replayed twice before the replay log existed: only the latest replay's time is known.
  await seedReceipt({
    source: "billing-before-log",
    eventKey: "evt_1001",
    receivedAt: at("2026-11-05T15:00:00Z"),
    relayedAt: at("2026-11-05T15:00:00Z"),
    status: "processed",
    processedAt: at("2026-11-05T15:00:01Z"),
    replayCount: 2,
    replayedAt: at("2026-11-06T10:00:00Z"),
  });
});

describe("docs/audit.md recipes", () => {
  it("are all present and paste safely inside a double-quoted --command", () => {
    expect([...RECIPES.keys()].sort()).toEqual([
      "dead-since",
      "life-of-one-event",
      "oldest-pending",
      "per-source-per-hour",
      "reconciled",
    ]);
    for (const [name, text] of RECIPES) expect(text, name).not.toMatch(/["`$]/);
  });

  it("the life of one event, in order", async () => {
    const rows = await run<{ at: string | null; step: string; detail: string | null }>("life-of-one-event");
    expect(rows.map((row) => [row.at, row.step])).toEqual([
      ["2026-11-01 10:00:00", "received"],
      ["2026-11-01 10:00:00", "recorded in D1"],
      ["2026-11-01 10:00:01", "attempt 1"],
      ["2026-11-01 10:00:31", "attempt 2"],
      ["2026-11-01 10:00:31", "finished"],
      ["2026-11-01 10:01:00", "quarantined copy"],
      ["2026-11-01 10:02:00", "replay 1"],
      ["2026-11-01 10:02:00", "attempt 3"],
      ["2026-11-01 10:03:00", "replay 2"],
      ["2026-11-01 10:03:00", "attempt 4"],
      [null, "now"],
    ]);
    expect(rows[0]!.detail).toMatch(/^live as receipt [0-9A-Z]{26}$/);
    expect(rows[2]!.detail).toBe("retry HTTP 503 in 200 ms: destination answered 503");
    expect(rows[3]!.detail).toBe("processed HTTP 200 in 100 ms");
    expect(rows[5]!.detail).toBe(`payload-mismatch, payload sha256 ${"ab".repeat(32)}`);
    expect(rows[6]!.detail).toBe("was processed, via api");
    expect(rows[7]!.detail).toBe("duplicate in 10 ms: already committed by an earlier run; nothing applied");
    expect(rows[8]!.detail).toBe("was processed, via dashboard");
    expect(rows[10]!.detail).toBe("processed after 2 attempt(s)");
  });

  it("the life of an event replayed before the replay log existed shows its latest replay", async () => {
    const text = RECIPES.get("life-of-one-event")!.replace("source = 'billing'", "source = 'billing-before-log'");
    const { results } = await env.DB.prepare(text).all<{ at: string | null; step: string; detail: string | null }>();
    expect(results.map((row) => [row.at, row.step, row.detail])).toEqual([
      ["2026-11-05 15:00:00", "received", expect.stringMatching(/^live as receipt /)],
      ["2026-11-05 15:00:00", "recorded in D1", null],
      ["2026-11-05 15:00:01", "finished", "processed"],
      ["2026-11-06 10:00:00", "replay 2", "the latest; earlier ones predate the replay log"],
      [null, "now", "processed after 0 attempt(s)"],
    ]);
  });

  it("everything dead since a time", async () => {
    const rows = await run<{ source: string; event_key: string; died: string; last_error: string }>("dead-since");
    const billing = rows.filter((row) => row.source === "billing");
    expect(billing.map((row) => [row.event_key, row.died, row.last_error])).toEqual([
      ["evt_2001", "2026-11-02 00:00:01", "data.amount must be an integer"],
      ["evt_2003", "2026-11-03 12:15:00", "work queue gave up after 100 deliveries"],
    ]);
    expect(rows.every((row) => row.died >= "2026-11-01")).toBe(true);
  });

  it("accepted and quarantined per source per hour", async () => {
    const rows = await run<{ source: string; hour: string; accepted: number; quarantined: number }>(
      "per-source-per-hour",
    );
    expect(rows.filter((row) => row.source === "billing")).toEqual([
      { source: "billing", hour: "2026-11-01 10:00", accepted: 2, quarantined: 1 },
      { source: "billing", hour: "2026-11-03 12:00", accepted: 1, quarantined: 0 },
      { source: "billing", hour: "2026-11-04 08:00", accepted: 1, quarantined: 0 },
      { source: "billing", hour: "2026-11-04 09:00", accepted: 1, quarantined: 0 },
      { source: "billing", hour: "2026-11-05 14:00", accepted: 1, quarantined: 0 },
    ]);
  });

  it("oldest pending per source", async () => {
    const rows = await run<{
      source: string;
      waiting: number;
      processing: number;
      oldest_received: string;
      oldest_age_minutes: number;
    }>("oldest-pending");
    const billing = rows.find((row) => row.source === "billing");
    expect(billing).toMatchObject({ waiting: 2, processing: 1, oldest_received: "2026-11-04 08:00:00" });
    const expectedAge = (Date.now() - at("2026-11-04T08:00:00Z")) / 60_000;
    expect(Math.abs(billing!.oldest_age_minutes - expectedAge)).toBeLessThan(2);
  });

  it("events reconciled rather than delivered", async () => {
    const rows = await run<{ source: string; event_key: string; found_at: string; occurred: string }>("reconciled");
    expect(rows.filter((row) => row.source === "billing")).toEqual([
      expect.objectContaining({
        event_key: "evt_4001",
        found_at: "2026-11-05 06:00:00",
        occurred: "2026-11-04 23:00:00",
      }),
    ]);
  });
});
