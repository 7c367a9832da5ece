import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardCount, shardIndex } from "../../src/claims/routing";
import { TALLY_SIZE } from "../../src/lib/delivery-tally";
import { difference, type MeterTotals } from "../../src/lib/meter";
import { sweepShards } from "../../src/reconcile/redrive";
import { applyRetention } from "../../src/reconcile/retention";
import type { SourceConfig } from "../../src/sources/config";
import { loadSources } from "../../src/sources/registry";
import { credit, deliverDemo, eventually, post, signDemo } from "../support/deliveries";
import { meterTotals } from "../support/meters";
import { lateRelays, shardClaim } from "../support/storage";

/**
 * Every billed write of an event's whole life, read from the runtime's own meters: acceptance, relay and
 * processing through the real route, shard, queue and consumer, then retention as the cron runs it — the body
 * dropped after payload retention, the receipt (with its arbiter key) and the shard's tombstone deleted after
 * dedupe retention. Row counts are deterministic, so they are held exactly; the bench prices them
 * (`npm run bench -- --only meters`, `allInUsdPerMillion`).
 *
 * Retention is run as the cron's retention and shard sweep for this source alone, so that the count is this
 * source's events' and not the sweep of every test source's shards.
 */

/** Two tallies' worth: acknowledged deliveries share one Analytics Engine point per TALLY_SIZE (25). */
const EVENTS = 2 * TALLY_SIZE;
const MINUTE = 60_000;

/** Per event, the happy path: D1 relay insert (row + (source, event_key) arbiter) and commit; claim and tombstone. */
const HAPPY_D1_ROWS = 3;
const HAPPY_DO_ROWS = 2;
/**
 * Per event, retention: the body dropped (an update, 1), then the receipt deleted (1: a delete is billed one row,
 * its arbiter key's index entry included); the shard's tombstone forgotten with its whole time partition, a DROP
 * TABLE that writes no row (src/claims/partitions.ts; deleted one by one, it was 1 row each).
 */
const BODY_DROP_D1_ROWS = 1;
const KEY_DELETE_D1_ROWS = 1;
const RETENTION_D1_ROWS = BODY_DROP_D1_ROWS + KEY_DELETE_D1_ROWS;
const RETENTION_DO_ROWS = 0;
/**
 * Per shard holding claims, not per event: the partition's turnover when it expires — closing it (its catalog row
 * updated, the next partition's table created, 2, and catalogued) and dropping it (its catalog row deleted).
 */
const PARTITION_TURNOVER_DO_ROWS = 5;

/**
 * A source whose three routes all match every event (test/fixtures/sources/budget-routes.json: the accounts handler,
 * then two forwards; the bench meters the same shape, bench/lib/route-variants.ts). On the happy path, the one-route
 * rows and one `deliveries` row per further route (the forwards' first attempt runs on the lease the relay's message
 * granted, src/consumers/lease/relay-grant.ts, so it writes no lease row); at
 * retention, the one-route rows and each `deliveries` row's delete.
 */
const THREE_ROUTES_SOURCE = "budget-three-routes";
const FURTHER_ROUTES = 2;
const THREE_ROUTES_HAPPY_D1_ROWS = HAPPY_D1_ROWS + FURTHER_ROUTES;
const THREE_ROUTES_KEY_DELETE_D1_ROWS = KEY_DELETE_D1_ROWS + FURTHER_ROUTES;

/**
 * Until every one of this test's events is processed. Not settle(): its after-test check asks every shard for
 * unrelayed claims, which has nothing left to find once retention ran and is slow on a loaded machine.
 */
async function processedAll(keyPrefix: string, events: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM receipts WHERE event_key LIKE ?1 || '%' AND status = 'processed'",
    )
      .bind(keyPrefix)
      .first<{ n: number }>();
    if (row?.n === events) return;
    if (Date.now() > deadline) throw new Error(`${row?.n ?? 0} of ${events} events processed after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** This test's receipts whose keys start with `keyPrefix` (those still holding a body, with `withBody`). */
async function receiptsLeft(keyPrefix: string, withBody = false): Promise<number> {
  const row = await env.DB.prepare(
    `SELECT COUNT(*) AS n FROM receipts WHERE event_key LIKE ?1 || '%'${withBody ? " AND body IS NOT NULL" : ""}`,
  )
    .bind(keyPrefix)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

/** The cron's retention and shard sweep for one source, as if run at `at`. */
async function expireAt(source: SourceConfig, at: number): Promise<void> {
  await applyRetention(env, [source], at);
  await sweepShards(env, [source], at);
}

async function spentDuring(work: () => Promise<unknown>): Promise<MeterTotals> {
  const before = await meterTotals("demo", THREE_ROUTES_SOURCE);
  await work();
  return difference(await meterTotals("demo", THREE_ROUTES_SOURCE), before);
}

describe("an event's whole life, retention included", { timeout: 300_000 }, () => {
  it(`writes ${HAPPY_D1_ROWS + RETENTION_D1_ROWS} D1 and ${HAPPY_DO_ROWS + RETENTION_DO_ROWS} Durable Object rows per event (alarms apart), one Analytics Engine point per ${TALLY_SIZE} events and no log line`, async () => {
    const demo = loadSources(env).get("demo")!;
    const keys = Array.from({ length: EVENTS }, (_, index) => `msg_life_${index}`);
    const happy = await spentDuring(async () => {
      const answers = await Promise.all(
        keys.map((key, index) => deliverDemo(key, credit(`acct_life_${index % 7}`, 1))),
      );
      expect(answers.map((answer) => answer.status)).toEqual(Array(EVENTS).fill(200));
      await processedAll("msg_life_", EVENTS, 120_000);
    });
    // A claim relayed more than 10 s after it arrived also enters the late-relay index (one row more on insert and
    // on delete): rare, but a loaded machine makes it happen, so it is counted rather than assumed away.
    const late = await lateRelays("event_key LIKE 'msg_life_%'");
    expect(happy.d1RowsWritten - happy.d1HandlerRowsWritten).toBe(HAPPY_D1_ROWS * EVENTS + late);
    expect(happy.doRowsWritten - happy.doAlarmWrites).toBe(HAPPY_DO_ROWS * EVENTS);
    // One point per 25 acknowledged deliveries (src/lib/delivery-tally.ts; a processed attempt writes none) and, by
    // default, no routine log line.
    expect({ analyticsPoints: happy.analyticsPoints, logLines: happy.logLines }).toEqual({
      analyticsPoints: EVENTS / TALLY_SIZE,
      logLines: 0,
    });

    const receivedBy = Date.now();
    const bodies = await spentDuring(() => applyRetention(env, [demo], receivedBy + demo.payloadRetentionMs + MINUTE));
    expect(await receiptsLeft("msg_life_", true)).toBe(0);

    const deletes = await spentDuring(() => expireAt(demo, receivedBy + demo.dedupeRetentionMs + MINUTE));
    expect(await receiptsLeft("msg_life_")).toBe(0);
    for (const key of keys) expect(await shardClaim("demo", key)).toBeNull();

    // Per event, exactly; each D1 pass also does fixed work (its cursors in `checkpoints`), fewer rows than there
    // are events, so the whole rows per event are the per-event count. The shards' fixed work is per shard, exactly.
    const perEvent = (rows: number) => Math.floor(rows / EVENTS);
    const shardsHolding = new Set(keys.map((key) => shardIndex(key, shardCount(env)))).size;
    const shardRows = bodies.doRowsWritten + deletes.doRowsWritten - deletes.doAlarmWrites;
    expect(shardRows).toBe(PARTITION_TURNOVER_DO_ROWS * shardsHolding + RETENTION_DO_ROWS * EVENTS);
    expect({
      bodyDropD1: perEvent(bodies.d1RowsWritten),
      keyDeleteD1: perEvent(deletes.d1RowsWritten),
      tombstoneDeleteDO: perEvent(shardRows - PARTITION_TURNOVER_DO_ROWS * shardsHolding),
      logLines: bodies.logLines + deletes.logLines,
      analyticsPoints: bodies.analyticsPoints + deletes.analyticsPoints,
    }).toEqual({
      bodyDropD1: BODY_DROP_D1_ROWS,
      keyDeleteD1: KEY_DELETE_D1_ROWS,
      tombstoneDeleteDO: RETENTION_DO_ROWS,
      logLines: 0,
      analyticsPoints: 0,
    });
  });

  // The one retention row that is a default, not an invariant: a source whose payload_retention equals its
  // dedupe_retention keeps each body as long as its key, and the cron's delete (keys first, src/reconcile/retention.ts)
  // takes the body with the receipt. What it saves and what it costs in storage: docs/performance.md.
  it(`writes ${KEY_DELETE_D1_ROWS} D1 row per event at retention, the delete, when a source keeps bodies as long as keys`, async () => {
    const demo = loadSources(env).get("demo")!;
    // What `payload_retention = "35d"` beside the default `dedupe_retention` parses to (src/sources/config.ts).
    const keeping = { ...demo, payloadRetentionMs: demo.dedupeRetentionMs };
    const kept = Array.from({ length: TALLY_SIZE }, (_, index) => `msg_kept_${index}`);
    const answers = await Promise.all(kept.map((key, index) => deliverDemo(key, credit(`acct_kept_${index % 7}`, 1))));
    expect(answers.map((answer) => answer.status)).toEqual(Array(kept.length).fill(200));
    await processedAll("msg_kept_", kept.length, 120_000);
    const receivedBy = Date.now();
    // Past the default payload retention, the bodies stay and nothing of these receipts is written.
    const early = await spentDuring(() =>
      applyRetention(env, [keeping], receivedBy + demo.payloadRetentionMs + MINUTE),
    );
    expect(await receiptsLeft("msg_kept_", true)).toBe(kept.length);
    const atEnd = await spentDuring(() => expireAt(keeping, receivedBy + demo.dedupeRetentionMs + MINUTE));
    expect(await receiptsLeft("msg_kept_")).toBe(0);
    // As above: each pass's fixed work (its cursors) is fewer rows than there are events.
    const perEvent = (rows: number) => Math.floor(rows / kept.length);
    expect({ early: perEvent(early.d1RowsWritten), atEnd: perEvent(atEnd.d1RowsWritten) }).toEqual({
      early: 0,
      atEnd: KEY_DELETE_D1_ROWS,
    });
  });

  it(`writes ${THREE_ROUTES_HAPPY_D1_ROWS} D1 rows per event on the happy path and ${BODY_DROP_D1_ROWS + THREE_ROUTES_KEY_DELETE_D1_ROWS} at retention when a source's three routes all match, and the one-route source's Durable Object rows`, async () => {
    const source = loadSources(env).get(THREE_ROUTES_SOURCE)!;
    const keys = Array.from({ length: TALLY_SIZE }, (_, index) => `msg_routes_${index}`);
    const furtherProcessed = async () =>
      (
        await env.DB.prepare(
          `SELECT COUNT(*) AS n FROM deliveries d JOIN receipts r ON r.id = d.receipt_id
           WHERE r.event_key LIKE 'msg_routes_%' AND d.status = 'processed'`,
        ).first<{ n: number }>()
      )?.n;
    const happy = await spentDuring(async () => {
      const answers = await Promise.all(
        keys.map((key, index) => {
          const body = JSON.stringify(credit(`acct_routes_${index % 7}`, 1));
          return post(`/webhooks/${THREE_ROUTES_SOURCE}`, body, signDemo(key, body));
        }),
      );
      expect(answers.map((answer) => answer.status)).toEqual(Array(keys.length).fill(200));
      await processedAll("msg_routes_", keys.length, 120_000);
      await eventually(
        async () => ((await furtherProcessed()) === FURTHER_ROUTES * keys.length ? true : undefined),
        60_000,
        "every further delivery processed",
      );
    });
    // As above, a claim relayed late writes one row more on insert (its delete is one row all the same).
    const late = await lateRelays("event_key LIKE 'msg_routes_%'");
    expect(happy.d1RowsWritten - happy.d1HandlerRowsWritten).toBe(THREE_ROUTES_HAPPY_D1_ROWS * keys.length + late);
    expect(happy.doRowsWritten - happy.doAlarmWrites).toBe(HAPPY_DO_ROWS * keys.length);

    const receivedBy = Date.now();
    const bodies = await spentDuring(() =>
      applyRetention(env, [source], receivedBy + source.payloadRetentionMs + MINUTE),
    );
    expect(await receiptsLeft("msg_routes_", true)).toBe(0);
    const deletes = await spentDuring(() => expireAt(source, receivedBy + source.dedupeRetentionMs + MINUTE));
    expect(await receiptsLeft("msg_routes_")).toBe(0);
    expect(await furtherProcessed()).toBe(0);
    // As above: each pass's fixed work (its cursors) is fewer rows than there are events.
    const perEvent = (rows: number) => Math.floor(rows / keys.length);
    expect({ bodyDrop: perEvent(bodies.d1RowsWritten), keyDelete: perEvent(deletes.d1RowsWritten) }).toEqual({
      bodyDrop: BODY_DROP_D1_ROWS,
      keyDelete: THREE_ROUTES_KEY_DELETE_D1_ROWS,
    });
  });
});
