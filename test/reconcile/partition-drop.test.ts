import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { decodeBase64 } from "../../src/crypto/encoding";
import { ulidFloor } from "../../src/lib/ulid";
import { ARCHIVE_PAGE_ROWS, receiptTablesOf } from "../../src/reconcile/partition-archive";
import { turnPartitionRing } from "../../src/reconcile/partition-drop";
import { relayToD1 } from "../../src/relay/relay";
import { loadSources } from "../../src/sources/registry";
import { creditClaimAt } from "../support/claims";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique, withOnlySources } from "./support";

/**
 * Retention of the receipt partitions by drop, through the real cron entry point: the database the next period
 * writes into is archived to R2 as NDJSON, then emptied whole, writing no row whatever it held. The ring is
 * DB_P0..DB_P3, one a day (vitest.config.ts); the `partitioned` source keeps its keys two days.
 */

const DAY_MS = 86_400_000;
const SOURCE = "partitioned";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);

/** Today's period, tomorrow's database (the one readied now) and the day it last held, four days before tomorrow. */
function ringNow() {
  const now = Date.now();
  const today = Math.floor(now / DAY_MS);
  const binding = `DB_P${(today + 1) % 4}` as "DB_P0" | "DB_P1" | "DB_P2" | "DB_P3";
  return { now, binding, d1: env[binding], heldStart: (today - 3) * DAY_MS };
}

/** An id minted `offsetMs` into the held day: the first 10 characters are the time, the rest any base32. */
function heldId(heldStart: number, offsetMs: number, n: number, token: string): string {
  return ulidFloor(heldStart + offsetMs).slice(0, 10) + token + String(n).padStart(10, "0");
}

/** `count` receipts of the held day (with bodies), a delivery and a replay of the first, a quarantined copy. */
async function seedHeldDay(d1: D1Database, heldStart: number, count: number, status = "processed"): Promise<string[]> {
  // Hexadecimal in capitals is base32 too: ids no earlier seeding used.
  const token = unique().slice(0, 6).toUpperCase();
  const ids = Array.from({ length: count }, (_, n) => heldId(heldStart, 1_000 + n, n, token));
  await d1.batch([
    ...ids.map((receiptId, n) =>
      d1
        .prepare(
          `INSERT INTO receipts (id, source, event_key, event_type, payload_sha256, body, received_at, relayed_at, status, attempts, lease_generation)
           VALUES (?, ?, ?, 'account.credited', ?, ?, ?, ?, ?, 1, 1)`,
        )
        .bind(
          receiptId,
          SOURCE,
          `msg_drop_${receiptId}`,
          "0".repeat(64),
          new TextEncoder().encode(`body ${n}`),
          heldStart,
          heldStart,
          n === 0 ? status : "processed",
        ),
    ),
    d1
      .prepare("INSERT INTO deliveries (receipt_id, route, status, attempts) VALUES (?, 'ledger', 'processed', 1)")
      .bind(ids[0]),
    d1
      .prepare(
        "INSERT INTO replays (receipt_id, replay_number, replayed_at, previous_status, requested_by) VALUES (?, 1, ?, 'dead', 'api')",
      )
      .bind(ids[0], heldStart),
    d1
      .prepare(
        "INSERT INTO quarantine (id, source, event_key, reason, payload_sha256, received_at) VALUES (?, ?, ?, 'payload-mismatch', ?, ?)",
      )
      .bind(heldId(heldStart, 5_000, 99_999, token), SOURCE, `msg_drop_${ids[0]}`, "1".repeat(64), heldStart),
  ]);
  return ids;
}

/** Every line of every archive object of the held day, parsed. */
async function archived(binding: string, heldStart: number): Promise<Record<string, unknown>[]> {
  const listed = await env.BODIES.list({ prefix: `archive/${binding}/${new Date(heldStart).toISOString()}/` });
  const lines: Record<string, unknown>[] = [];
  for (const object of listed.objects) {
    const text = await (await env.BODIES.get(object.key))!.text();
    lines.push(
      ...text
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    );
  }
  return lines;
}

async function rowCount(d1: D1Database, table: string): Promise<number> {
  return (await d1.prepare(`SELECT COUNT(*) AS count FROM ${table}`).first<{ count: number }>())!.count;
}

async function clearCheckpoint(binding: string): Promise<void> {
  await env.DB.prepare("DELETE FROM checkpoints WHERE source = '*' AND reconciler = ?")
    .bind(`partition-ring:${binding}`)
    .run();
}

describe("retention of the receipt partitions by drop", () => {
  it("archives the next period's database to R2, then empties it writing no row, whatever it held", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const written: number[] = [];
    for (const receipts of [3, 40]) {
      const { now, binding, d1, heldStart } = ringNow();
      await clearCheckpoint(binding);
      const ids = await seedHeldDay(d1, heldStart, receipts);
      const run = await cronRun(now + receipts, CRON_ENV);
      expect(run.failures).toBeNull();
      expect(run.counts.partitions).toMatchObject({ databasesEmptied: 1 });
      written.push(run.counts.partitions.rowsWrittenByDrop);

      for (const table of ["receipts", "deliveries", "replays", "quarantine"])
        expect(await rowCount(d1, table)).toBe(0);
      const lines = await archived(binding, heldStart);
      // Every row of every table: the seeded ones and the cron's own cursors there.
      expect(lines.length).toBe(run.counts.partitions.archivedRows);
      expect(lines.length).toBeGreaterThanOrEqual(receipts + 3);
      const ofTable = (table: string) => lines.filter((line) => line.table === table);
      expect(ofTable("receipts").map((line) => line.id)).toEqual(ids);
      expect(ofTable("receipts").map((line) => new TextDecoder().decode(decodeBase64(line.body as string)!))).toEqual(
        ids.map((_, n) => `body ${n}`),
      );
      expect(ofTable("deliveries")).toMatchObject([{ receipt_id: ids[0], route: "ledger", status: "processed" }]);
      expect(ofTable("replays")).toMatchObject([{ receipt_id: ids[0], replay_number: 1, requested_by: "api" }]);
      expect(ofTable("quarantine")).toMatchObject([{ source: SOURCE, reason: "payload-mismatch" }]);

      // Emptied, not broken: the database takes a receipt again, its indexes and triggers in place.
      const indexes = await d1
        .prepare(
          "SELECT COUNT(*) AS count FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name = 'receipts'",
        )
        .first<{ count: number }>();
      expect(indexes!.count).toBeGreaterThan(3);
      const again = await cronRun(now + receipts + 1, CRON_ENV);
      expect(again.counts.partitions).toMatchObject({ databasesEmptied: 0, archivePages: 0 });
    }
    // No row per event: emptying 40 receipts writes what emptying 3 does, the rows of the schema itself (each table,
    // index and trigger dropped and created again in sqlite_master), a fixed count per database and period.
    expect(written[1]).toBe(written[0]);
    expect((written[1]! - written[0]!) / (40 - 3)).toBe(0);
  });

  it("archives a large partition a bounded number of pages per run, resuming from its checkpoint", async () => {
    const { now, binding, d1, heldStart } = ringNow();
    await clearCheckpoint(binding);
    const ids = await seedHeldDay(d1, heldStart, ARCHIVE_PAGE_ROWS + 50);
    const sources = [...loadSources(env).values()];
    const first = await turnPartitionRing(env, sources, now, 1);
    expect(first).toMatchObject({ archivePages: 1, databasesEmptied: 0 });
    expect(await rowCount(d1, "receipts")).toBe(ids.length);
    const second = await turnPartitionRing(env, sources, now, 10);
    expect(second).toMatchObject({ databasesEmptied: 1 });
    // A page is at most ARCHIVE_PAGE_ROWS rows of one table: the receipts took two pages.
    expect(first.archivePages + second.archivePages).toBeGreaterThanOrEqual(2 + 3);
    expect(first.archivedRows + second.archivedRows).toBeGreaterThanOrEqual(ids.length + 3);
    expect(await rowCount(d1, "receipts")).toBe(0);
    const lines = await archived(binding, heldStart);
    expect(lines.filter((line) => line.table === "receipts").map((line) => line.id)).toEqual(ids);
  });

  it("refuses, loudly, to empty a partition that still holds unfinished work, and leaves every row", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const { now, binding, d1, heldStart } = ringNow();
    await clearCheckpoint(binding);
    const ids = await seedHeldDay(d1, heldStart, 5, "pending");
    const run = await cronRun(now + 7, CRON_ENV);
    expect(run.failures).toEqual([
      expect.objectContaining({
        step: "partitions",
        error: expect.stringMatching(
          new RegExp(`PartitionNotReady: ${binding} .*unfinished work \\(receipts ${ids[0]}\\)`),
        ),
      }),
    ]);
    // Nor did row-by-row retention touch the finished ones, keys past their 2 days: the ring's databases are left to the drop.
    expect(await rowCount(d1, "receipts")).toBe(5);

    await d1.prepare("UPDATE receipts SET status = 'dead' WHERE id = ?").bind(ids[0]).run();
    const after = await cronRun(now + 8, CRON_ENV);
    expect(after.failures).toBeNull();
    expect(after.counts.partitions).toMatchObject({ databasesEmptied: 1 });
    expect(await rowCount(d1, "receipts")).toBe(0);
  });

  it("refuses the drop when a receipt came in after the archive, archives it next run, then drops", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const { now, binding, d1, heldStart } = ringNow();
    await clearCheckpoint(binding);
    const ids = await seedHeldDay(d1, heldStart, 3);
    // Every page archived, the run's page budget spent just as the last is written: the drop is left to the next run.
    let pagesNeeded = 0;
    for (const table of await receiptTablesOf(d1))
      pagesNeeded += Math.ceil((await rowCount(d1, table)) / ARCHIVE_PAGE_ROWS);
    const sources = [...loadSources(env).values()];
    expect(await turnPartitionRing(env, sources, now, pagesNeeded)).toMatchObject({
      archivePages: pagesNeeded,
      databasesEmptied: 0,
    });

    // A late relay: a claim minted in the held day, before every archived receipt, written by the real relay into the
    // held day's database (its work message goes nowhere; the consumer's finish is the UPDATE).
    const eventKey = `msg_late_${unique()}`;
    const lateClaim = creditClaimAt(SOURCE, heldStart + 500, eventKey, "2".repeat(64));
    const late = lateClaim.receiptId;
    const discard = { send: async () => {}, sendBatch: async () => {} } as unknown as Queue;
    const relayed = await relayToD1({ ...env, WORK_QUEUE: discard }, [lateClaim], []);
    expect(relayed.receiptsRelayed).toBe(1);
    await d1.prepare("UPDATE receipts SET status = 'processed' WHERE id = ?").bind(late).run();

    const refused = await cronRun(now + 11, CRON_ENV);
    expect(refused.failures).toBeNull();
    expect(refused.counts.partitions).toMatchObject({ dropsRefused: 1, databasesEmptied: 0, rowsWrittenByDrop: 0 });
    expect(await rowCount(d1, "receipts")).toBe(ids.length + 1);

    const dropped = await cronRun(now + 12, CRON_ENV);
    expect(dropped.failures).toBeNull();
    expect(dropped.counts.partitions).toMatchObject({ dropsRefused: 0, databasesEmptied: 1 });
    expect(await rowCount(d1, "receipts")).toBe(0);
    const receipts = (await archived(binding, heldStart)).filter((line) => line.table === "receipts");
    expect(receipts.map((line) => line.id)).toEqual([late, ...ids]);

    // The guard writes no row per event: a drop of 40 receipts after it writes what this one did.
    await clearCheckpoint(binding);
    await seedHeldDay(d1, heldStart, 40);
    const larger = await cronRun(now + 13, CRON_ENV);
    expect(larger.counts.partitions).toMatchObject({ databasesEmptied: 1 });
    expect(larger.counts.partitions.rowsWrittenByDrop).toBe(dropped.counts.partitions.rowsWrittenByDrop);
  });
});
