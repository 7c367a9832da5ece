import { receiptDetail } from "../../src/admin/queries";
import { database } from "../../src/db/client";
import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import worker from "../../src/index";
import type { QueuedWork } from "../../src/model/work-message";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardFor } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { sha256Hex } from "../../src/crypto/digest";
import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import { eventually, waitForStatus } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, cronRun, cronUntil, receipt, unique } from "./support";

const SOURCE = "reconcile-stuck";
const MINUTE = 60_000;

/** A receipt row as the relay would have written it, `ageMs` ago, in the given state. */
async function storedReceipt(
  eventKey: string,
  fields: { status: string; nextAttemptAt?: number; leaseUntil?: number; attempts?: number; leaseGeneration?: number },
  ageMs: number,
  now: number,
) {
  const receiptId = ulid(now - ageMs);
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, lease_until, attempts, lease_generation)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(
      receiptId,
      SOURCE,
      eventKey,
      "0".repeat(64),
      utf8Bytes("{}"),
      now - ageMs,
      now - ageMs,
      fields.status,
      fields.nextAttemptAt ?? null,
      fields.leaseUntil ?? null,
      fields.attempts ?? 0,
      fields.leaseGeneration ?? 0,
    )
    .run();
  return receiptId;
}

describe("re-drive", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("flushes a claim whose relay alarm was lost", async () => {
    const eventKey = `msg_unrelayed_${unique()}`;
    const now = Date.now();
    const body = utf8Bytes(JSON.stringify({ type: "thing.happened" }));
    const stub = shardFor(env, SOURCE, eventKey);
    // Claim inside the object and delete the alarm before it can fire: the acknowledged claim is now stranded.
    await runInDurableObject(stub, async (shard: ClaimShard, state) => {
      await shard.claim({
        source: SOURCE,
        eventKey,
        eventKeySigned: true,
        payloadSha256: await sha256Hex(body),
        eventType: "thing.happened",
        subjectId: null,
        version: null,
        occurredAt: null,
        body,
        keptHeaders: "{}",
        receivedAt: now,
        provenance: "live",
      });
      await state.storage.deleteAlarm();
    });
    expect(await stub.unrelayedCount()).toBe(1);
    expect(await receipt(SOURCE, eventKey)).toBeNull();

    const runs = await cronUntil(now, async () => (await stub.unrelayedCount()) === 0);
    expect(runs.reduce((sum, run) => sum + run.counts.shards.claimsRelayed, 0)).toBeGreaterThanOrEqual(1);
    expect(await waitForStatus(SOURCE, eventKey, ["skipped"])).toBe("skipped");
  });

  it("re-enqueues a pending receipt whose message never came, and takes back expired leases", async () => {
    const now = Date.now();
    const overdue = `msg_overdue_${unique()}`;
    const abandonedFirst = `msg_abandoned_${unique()}`;
    const leased = `msg_leased_${unique()}`;
    const fresh = `msg_fresh_${unique()}`;
    // Never attempted, 20 minutes old: its message was lost. Found by the id-order scan.
    await storedReceipt(overdue, { status: "pending" }, 20 * MINUTE, now);
    // A first attempt that took a lease and died with its message: also found by the scan, once past the grace.
    await storedReceipt(abandonedFirst, { status: "processing", leaseUntil: now - 14 * MINUTE, attempts: 0, leaseGeneration: 1 }, 20 * MINUTE, now);
    // A leased retry whose consumer died: found through the retry index, its abandoned attempt recorded as unknown.
    const leasedId = await storedReceipt(
      leased,
      { status: "processing", nextAttemptAt: now - 6 * MINUTE, leaseUntil: now - MINUTE, attempts: 1, leaseGeneration: 2 },
      7 * MINUTE,
      now,
    );
    await env.DB.prepare("INSERT INTO attempts (receipt_id, attempt_number, started_at, finished_at, outcome, error) VALUES (?, 1, ?, ?, 'retry', 'boom')")
      .bind(leasedId, now - 7 * MINUTE, now - 7 * MINUTE + 100)
      .run();
    // Relayed a minute ago and not yet consumed: within the grace period, so left alone.
    await storedReceipt(fresh, { status: "pending" }, MINUTE, now);

    // The scan reads receipts in id (time) order once each, from a checkpoint; the test before this one moved it
    // past these back-dated ids, so start it afresh, as on a new deployment.
    await env.DB.prepare("DELETE FROM checkpoints WHERE reconciler = 'overdue-scan'").run();
    const run = await cronRun(now);
    expect(run.failures).toBeNull();
    expect(run.counts.redrive.overdueReenqueued).toBe(2);
    expect(run.counts.redrive.expiredLeasesReturned).toBe(1);

    expect(await waitForStatus(SOURCE, overdue, ["skipped"])).toBe("skipped");
    expect(await waitForStatus(SOURCE, abandonedFirst, ["skipped"])).toBe("skipped");
    expect(await waitForStatus(SOURCE, leased, ["skipped"])).toBe("skipped");
    const timeline = (await receiptDetail(database(env), leasedId))!.attempts;
    expect(timeline.map(({ attemptNumber, outcome, error }) => ({ attemptNumber, outcome, error }))).toEqual([
      { attemptNumber: 1, outcome: "retry", error: "boom" },
      { attemptNumber: 2, outcome: "unknown", error: "lease expired before the attempt finished" },
      { attemptNumber: 3, outcome: "skipped", error: "source has no destination" },
    ]);
    expect((await receipt(SOURCE, fresh))?.status).toBe("pending");

    // The next run finds nothing new: the scan moved past these receipts, and the claimed ones are finished.
    const again = await cronRun(now + 1000);
    expect(again.counts.redrive.overdueReenqueued).toBe(0);
    expect(again.counts.redrive.expiredLeasesReturned).toBe(0);
  });

  it("keeps one message in flight for a receipt of a broken source: the consumer's wait is a due time the re-drive respects", async () => {
    const now = Date.now();
    const eventKey = `msg_broken_source_${unique()}`;
    // Relayed 20 minutes ago, its message bouncing off a source whose table is broken ever since.
    const receiptId = await storedReceipt(eventKey, { status: "pending" }, 20 * MINUTE, now);
    const sources = env.SOURCES as Record<string, Record<string, unknown>>;
    const brokenEnv = { ...env, SOURCES: { ...sources, [SOURCE]: { ...sources[SOURCE], destination: "ftp://nowhere" } } } as Env;
    const batch = createMessageBatch<QueuedWork>("webhook-work", [
      { id: "broken-source-1", timestamp: new Date(), attempts: 1, body: { source: SOURCE, receiptIds: [receiptId] } },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, brokenEnv, ctx);
    // The consumer sent the receipt back as a new message and acknowledged the one it was given.
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["broken-source-1"]);
    const waiting = await env.DB.prepare("SELECT status, attempts, next_attempt_at AS nextAttemptAt FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first<{ status: string; attempts: number; nextAttemptAt: number | null }>();
    expect(waiting).toMatchObject({ status: "pending", attempts: 0 });
    // The wait is on record: the message that comes back is due then, and until then it is the one in flight.
    expect(waiting!.nextAttemptAt).toBeGreaterThan(now);

    // So the cron, which takes a never-attempted receipt this old for one whose message was lost, sends no copy.
    const run = await cronRun(Date.now());
    expect(run.failures).toBeNull();
    const after = await env.DB.prepare("SELECT next_attempt_at AS nextAttemptAt FROM receipts WHERE id = ?").bind(receiptId).first<{ nextAttemptAt: number }>();
    expect(after!.nextAttemptAt).toBe(waiting!.nextAttemptAt);
    expect(run.counts.redrive.overdueReenqueued).toBe(0);
  });
});
