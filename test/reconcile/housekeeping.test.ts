import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { partitionTable } from "../../src/claims/partitions";
import { shardsOf } from "../../src/claims/routing";
import { ulidFloor } from "../../src/lib/ulid";
import { applyRetention, RETENTION_BATCH } from "../../src/reconcile/retention";
import { loadSources } from "../../src/sources/registry";
import { everyClaim } from "../support/storage";
import { CRON_TEST_TIMEOUT_MS, runCron, runsAt, unique } from "./support";

const DAY = 86_400_000;

/**
 * A deployment of one source (default retention: bodies 7 days, keys 35 days), so a cron run visits its 8 shards
 * as it would in production rather than rotating through the test suite's hundreds.
 */
function deploymentOf(source: string): Env {
  return {
    ...env,
    SOURCES: { [source]: { provider: "standard-webhooks", secrets: ["DEMO_WEBHOOK_SECRET"], destination: "none" } },
  } as Env;
}

/**
 * `count` receipts received at `receivedAt` (ids in that millisecond's ULID range), written straight into D1:
 * finished ones with their outcome committed, each with one failed attempt row when `withAttempts`.
 */
async function seedReceipts(
  source: string,
  tag: string,
  count: number,
  receivedAt: number,
  options: { status: "processed" | "pending"; withAttempts: boolean; nextAttemptAt?: number },
): Promise<void> {
  const prefix = ulidFloor(receivedAt).slice(0, 10);
  await env.DB.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
     INSERT INTO receipts (id, source, event_key, payload_sha256, body, kept_headers, received_at, relayed_at, status,
       attempts, processed_at, committed_at, next_attempt_at)
     SELECT ?2 || printf('%016d', i), ?3, ?4 || '-' || i, 'seeded', randomblob(200), '{}', ?5, ?5, ?6,
       CASE WHEN ?6 = 'processed' THEN 1 ELSE 0 END, CASE WHEN ?6 = 'processed' THEN ?5 END, CASE WHEN ?6 = 'processed' THEN ?5 END, ?7
     FROM n`,
  )
    .bind(count, prefix, source, tag, receivedAt, options.status, options.nextAttemptAt ?? null)
    .run();
  if (!options.withAttempts) return;
  await env.DB.prepare(
    `INSERT INTO attempts (receipt_id, attempt_number, started_at, finished_at, outcome, error)
     SELECT id, 1, received_at, received_at, 'failed', 'seeded' FROM receipts WHERE id >= ?1 AND id < ?1 || 'Z' AND source = ?2`,
  )
    .bind(prefix, source)
    .run();
}

/** Receipts (or their attempts, or those still holding a body) of one seeded group, by its ULID time prefix. */
async function groupCount(
  source: string,
  receivedAt: number,
  what: "receipts" | "attempts" | "bodies",
): Promise<number> {
  const prefix = ulidFloor(receivedAt).slice(0, 10);
  const inGroup = "id >= ?1 AND id < ?1 || 'Z' AND source = ?2";
  const query = {
    receipts: `SELECT COUNT(*) AS n FROM receipts WHERE ${inGroup}`,
    bodies: `SELECT COUNT(*) AS n FROM receipts WHERE ${inGroup} AND body IS NOT NULL`,
    attempts: `SELECT COUNT(*) AS n FROM attempts WHERE receipt_id IN (SELECT id FROM receipts WHERE ${inGroup})
               OR (receipt_id >= ?1 AND receipt_id < ?1 || 'Z')`,
  }[what];
  return (await env.DB.prepare(query).bind(prefix, source).first<{ n: number }>())?.n ?? 0;
}

/**
 * Dedupe tombstones written straight into each shard of the source, into its open time partition
 * (src/claims/partitions.ts): `perShard` received at `receivedAt`.
 */
async function seedTombstones(
  deployment: Env,
  source: string,
  tag: string,
  perShard: number,
  receivedAt: number,
): Promise<void> {
  await Promise.all(
    shardsOf(deployment, source).map((stub, shard) =>
      runInDurableObject(stub, (_instance, state) => {
        const open = state.storage.sql
          .exec<{ generation: number }>("SELECT MAX(generation) AS generation FROM claim_partitions")
          .one().generation;
        state.storage.sql.exec(
          `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
           INSERT INTO ${partitionTable(open)} (relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance)
           SELECT 0, ?2, ?3 || '-' || ?4 || '-' || i, ?5 || printf('%016d', i), 'seeded', ?6, 'live' FROM n`,
          perShard,
          source,
          tag,
          shard,
          ulidFloor(receivedAt).slice(0, 10),
          receivedAt,
        );
      }),
    ),
  );
}

async function tombstonesReceivedBefore(deployment: Env, source: string, before: number): Promise<number> {
  const counts = await Promise.all(
    shardsOf(deployment, source).map((stub) =>
      runInDurableObject(
        stub,
        (_instance, state) =>
          state.storage.sql
            .exec<{ n: number }>(
              `SELECT COUNT(*) AS n FROM ${everyClaim(state.storage.sql)} WHERE relay_pending = 0 AND source = ? AND received_at < ?`,
              source,
              before,
            )
            .one().n,
      ),
    ),
  );
  return counts.reduce((sum, n) => sum + n, 0);
}

describe("housekeeping keeps pace with the backlog", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("removes a burst of 24,000 events past every retention window within two cron runs, in D1 and in the shards", async () => {
    const source = `housekeeping-burst-${unique()}`;
    const deployment = deploymentOf(source);
    const now = Date.now();
    const keysExpired = now - 40 * DAY;
    const stillPending = keysExpired + 1;
    const bodiesExpired = now - 10 * DAY;
    await seedReceipts(source, "old", 24_000, keysExpired, { status: "processed", withAttempts: true });
    // Unfinished work among the burst, its retry not yet due (so the re-drive leaves it alone too): never touched
    // by retention, and it does not stop the scan going past it.
    await seedReceipts(source, "unfinished", 3, stillPending, {
      status: "pending",
      withAttempts: false,
      nextAttemptAt: now + DAY,
    });
    await seedReceipts(source, "bodies", 12_000, bodiesExpired, { status: "processed", withAttempts: false });
    await seedTombstones(deployment, source, "old", 3_000, keysExpired);
    expect(await groupCount(source, keysExpired, "attempts")).toBe(24_000);
    expect(await tombstonesReceivedBefore(deployment, source, now - 35 * DAY)).toBe(24_000);

    // The shards forget keys a time partition at a time: the burst's partition, every claim in it past retention,
    // goes in the second run (the first run's key scan tells the shards which keys to keep). Claims received since
    // are in the partition that run opened, and a third run leaves them.
    await runCron(now, deployment);
    await runCron(now + 1, deployment);
    await seedTombstones(deployment, source, "fresh", 10, now - DAY);
    await runCron(now + 2, deployment);

    const runs = [...(await runsAt(now)), ...(await runsAt(now + 1)), ...(await runsAt(now + 2))];
    expect(runs.map((run) => run.failures)).toEqual([null, null, null]);
    expect(runs.reduce((sum, run) => sum + run.counts.retention.keysExpired, 0)).toBe(24_000);
    expect(runs.reduce((sum, run) => sum + run.counts.shards.shardKeysExpired, 0)).toBe(24_000);
    // Past dedupe retention: every receipt with its attempts, and every shard key, gone.
    expect(await groupCount(source, keysExpired, "receipts")).toBe(0);
    expect(await groupCount(source, keysExpired, "attempts")).toBe(0);
    expect(await tombstonesReceivedBefore(deployment, source, now - 35 * DAY)).toBe(0);
    // Past payload retention: every body gone, every keyed row kept.
    expect(await groupCount(source, bodiesExpired, "bodies")).toBe(0);
    expect(await groupCount(source, bodiesExpired, "receipts")).toBe(12_000);
    // Untouched: unfinished work whatever its age, and keys still inside their retention.
    expect(await groupCount(source, stillPending, "bodies")).toBe(3);
    expect(await tombstonesReceivedBefore(deployment, source, now)).toBe(80);
    for (const run of runs) {
      console.info(
        `burst run: retention ${run.counts.durationsMs.retention} ms (${run.counts.retention.keysExpired} receipts deleted, ` +
          `${run.counts.retention.bodiesDropped} bodies dropped), shards ${run.counts.durationsMs.shards} ms (${run.counts.shards.shardKeysExpired} keys)`,
      );
    }
  });

  it("goes on where the last run stopped when its time budget runs out, a page per run at the least", async () => {
    const source = `housekeeping-paced-${unique()}`;
    const deployment = deploymentOf(source);
    const sources = [...loadSources(deployment).values()];
    const now = Date.now();
    const keysExpired = now - 40 * DAY;
    const bodiesExpired = now - 10 * DAY;
    const pages = 5;
    await seedReceipts(source, "old", pages * RETENTION_BATCH, keysExpired, {
      status: "processed",
      withAttempts: true,
    });
    await seedReceipts(source, "bodies", 3 * RETENTION_BATCH, bodiesExpired, {
      status: "processed",
      withAttempts: false,
    });

    // A budget already spent: each run still does one page of each kind, and says it has not caught up. The
    // body scan may spend pages on receipts the key scan has not reached yet, so the bound is every page once.
    const pageBound = pages + 3 + 1;
    const counts = [];
    for (let run = 0; run < pageBound + 1; run++) {
      const result = await applyRetention(deployment, sources, now + run, 0);
      counts.push(result);
      if (result.caughtUp) break;
    }
    expect(counts[0]).toMatchObject({ keysExpired: RETENTION_BATCH, bodiesDropped: RETENTION_BATCH, caughtUp: false });
    expect(counts.length).toBeGreaterThan(1);
    expect(counts.length).toBeLessThanOrEqual(pageBound);
    expect(counts.at(-1)?.caughtUp).toBe(true);
    expect(counts.reduce((sum, result) => sum + result.keysExpired, 0)).toBe(pages * RETENTION_BATCH);
    expect(await groupCount(source, keysExpired, "receipts")).toBe(0);
    expect(await groupCount(source, keysExpired, "attempts")).toBe(0);
    expect(await groupCount(source, bodiesExpired, "bodies")).toBe(0);

    // Caught up, a later run finds nothing more and says so.
    expect(await applyRetention(deployment, sources, now + pages + 2, 0)).toMatchObject({
      keysExpired: 0,
      bodiesDropped: 0,
      caughtUp: true,
    });
  });
});
