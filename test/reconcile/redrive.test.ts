import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { receiptDetail } from "../../src/admin/receipts/receipt-detail";
import { shardFor } from "../../src/claims/routing";
import { utf8Bytes } from "../../src/crypto/encoding";
import { readCheckpoint, writeCheckpoint } from "../../src/db/checkpoints";
import { database } from "../../src/db/client";
import worker from "../../src/index";
import { ulid } from "../../src/lib/ulid";
import type { QueuedWork } from "../../src/model/work-message";
import { account, credit, eventually, waitForStatus } from "../support/deliveries";
import {
  CRON_TEST_TIMEOUT_MS,
  claimWithLostAlarm,
  cronRun,
  cronUntil,
  receipt,
  unique,
  withOnlySources,
} from "./support";

const SOURCE = "reconcile-stuck";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * A receipt row as the relay would have written it, received `ageMs` before `clock`, in the given state. Relayed on
 * receipt unless `relayedAt` says when it reached D1.
 */
async function storedReceipt(
  eventKey: string,
  fields: {
    status: string;
    nextAttemptAt?: number;
    leaseUntil?: number;
    attempts?: number;
    leaseGeneration?: number;
    relayedAt?: number;
    source?: string;
    eventType?: string;
    payload?: unknown;
  },
  ageMs: number,
  clock: number,
) {
  const receiptId = ulid(clock - ageMs);
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, event_type, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, lease_until, attempts, lease_generation)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(
      receiptId,
      fields.source ?? SOURCE,
      eventKey,
      fields.eventType ?? null,
      "0".repeat(64),
      utf8Bytes(JSON.stringify(fields.payload ?? {})),
      clock - ageMs,
      fields.relayedAt ?? clock - ageMs,
      fields.status,
      fields.nextAttemptAt ?? null,
      fields.leaseUntil ?? null,
      fields.attempts ?? 0,
      fields.leaseGeneration ?? 0,
    )
    .run();
  return receiptId;
}

/**
 * Each test's cron clock, an hour past the previous one's (and past now). The re-drive's cursors only move forward
 * with the clocks the runs are given, so a test's receipts, stored relative to its own clock, are never behind a
 * cursor an earlier test moved: no test has to reset one.
 */
let lastClock = 0;
function laterClock(): number {
  lastClock = Math.max(Date.now(), lastClock) + HOUR;
  return lastClock;
}

async function row(receiptId: string) {
  return env.DB.prepare(
    "SELECT status, attempts, next_attempt_at AS nextAttemptAt, lease_until AS leaseUntil FROM receipts WHERE id = ?",
  )
    .bind(receiptId)
    .first<{ status: string; attempts: number; nextAttemptAt: number | null; leaseUntil: number | null }>();
}

describe("re-drive", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("flushes a claim whose relay alarm was lost", async () => {
    const eventKey = `msg_unrelayed_${unique()}`;
    const now = Date.now();
    const stub = shardFor(env, SOURCE, eventKey);
    await claimWithLostAlarm(stub, SOURCE, eventKey, now);
    expect(await stub.unrelayedCount()).toBe(1);
    expect(await receipt(SOURCE, eventKey)).toBeNull();

    // Only this source's shards are visited: the claim's shard is among them on every run.
    const runs = await cronUntil(now, async () => (await stub.unrelayedCount()) === 0, 40, CRON_ENV);
    expect(runs.reduce((sum, run) => sum + run.counts.shards.claimsRelayed, 0)).toBeGreaterThanOrEqual(1);
    expect(await waitForStatus(SOURCE, eventKey, ["skipped"])).toBe("skipped");
  });

  it("re-enqueues a pending receipt whose message never came, and takes back expired leases", async () => {
    const now = laterClock();
    const overdue = `msg_overdue_${unique()}`;
    const abandonedFirst = `msg_abandoned_${unique()}`;
    const leased = `msg_leased_${unique()}`;
    const fresh = `msg_fresh_${unique()}`;
    // Never attempted, 20 minutes old: its message was lost. Found by the stuck scan.
    await storedReceipt(overdue, { status: "pending" }, 20 * MINUTE, now);
    // A first attempt that took a lease and died with its message: also found by the scan, once past the grace.
    await storedReceipt(
      abandonedFirst,
      { status: "processing", leaseUntil: now - 14 * MINUTE, attempts: 0, leaseGeneration: 1 },
      20 * MINUTE,
      now,
    );
    // A leased retry whose consumer died: found through the retry index, its abandoned attempt recorded as unknown.
    const leasedId = await storedReceipt(
      leased,
      {
        status: "processing",
        nextAttemptAt: now - 6 * MINUTE,
        leaseUntil: now - MINUTE,
        attempts: 1,
        leaseGeneration: 2,
      },
      7 * MINUTE,
      now,
    );
    await env.DB.prepare(
      "INSERT INTO attempts (receipt_id, attempt_number, started_at, finished_at, outcome, error) VALUES (?, 1, ?, ?, 'retry', 'boom')",
    )
      .bind(leasedId, now - 7 * MINUTE, now - 7 * MINUTE + 100)
      .run();
    // Relayed a minute ago and not yet consumed: within the grace period, so left alone.
    await storedReceipt(fresh, { status: "pending" }, MINUTE, now);

    const run = await cronRun(now, CRON_ENV);
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
    const again = await cronRun(now + 1000, CRON_ENV);
    expect(again.counts.redrive.overdueReenqueued).toBe(0);
    expect(again.counts.redrive.expiredLeasesReturned).toBe(0);
    // Once the fresh one is past the grace period too, it is re-driven and finishes: no lost message is left behind
    // for a later test's run to count.
    expect((await cronRun(now + 11 * MINUTE, CRON_ENV)).counts.redrive.overdueReenqueued).toBe(1);
    expect(await waitForStatus(SOURCE, fresh, ["skipped"])).toBe("skipped");
  });

  it("finds a receipt that reached D1 late, after the scan had passed its id, once it has been there the grace period", async () => {
    const clock = laterClock();
    // The scan passes every id received before clock - 10 min.
    expect((await cronRun(clock, CRON_ENV)).failures).toBeNull();
    // Received three hours before, relayed only now (a relay held up by an outage): its id sorts far behind the scan.
    const eventKey = `msg_late_relay_${unique()}`;
    const receiptId = await storedReceipt(eventKey, { status: "pending", relayedAt: clock }, 3 * HOUR, clock);
    // Its message is lost. Five minutes on it may still be on its way: left alone.
    expect((await cronRun(clock + 5 * MINUTE, CRON_ENV)).failures).toBeNull();
    expect(await row(receiptId)).toMatchObject({ status: "pending", nextAttemptAt: null });
    // Past the grace period after it reached D1, it is re-driven and finishes.
    const run = await cronRun(clock + 11 * MINUTE, CRON_ENV);
    expect(run.failures).toBeNull();
    expect(run.counts.redrive.overdueReenqueued).toBe(1);
    expect(await waitForStatus(SOURCE, eventKey, ["skipped"])).toBe("skipped");
    expect((await cronRun(clock + 12 * MINUTE, CRON_ENV)).counts.redrive.overdueReenqueued).toBe(0);
  });

  it("waits for a first attempt's live lease instead of passing it, and re-drives it once the lease has run out", async () => {
    const clock = laterClock();
    const eventKey = `msg_live_lease_${unique()}`;
    // Relayed 20 minutes ago; a consumer took its lease a minute ago and then died with the message.
    const receiptId = await storedReceipt(
      eventKey,
      { status: "processing", leaseUntil: clock + 4 * MINUTE, leaseGeneration: 1 },
      20 * MINUTE,
      clock,
    );
    const first = await cronRun(clock, CRON_ENV);
    expect(first.failures).toBeNull();
    expect(await row(receiptId)).toMatchObject({
      status: "processing",
      leaseUntil: clock + 4 * MINUTE,
      nextAttemptAt: null,
    });
    // The lease has run out by the next run, which reads the receipt again.
    const second = await cronRun(clock + 5 * MINUTE, CRON_ENV);
    expect(second.failures).toBeNull();
    expect(second.counts.redrive.overdueReenqueued).toBe(1);
    expect(await waitForStatus(SOURCE, eventKey, ["skipped"])).toBe("skipped");
  });

  it("re-enqueues a pending retry whose message was lost, and it is processed once", async () => {
    const clock = laterClock();
    const eventKey = `msg_lost_retry_${unique()}`;
    const accountId = `acct_lost_retry_${unique()}`;
    // Its first attempt failed and scheduled a retry for 11 minutes ago; the retry's message never came.
    const receiptId = await storedReceipt(
      eventKey,
      {
        source: "demo",
        eventType: "account.credited",
        payload: credit(accountId, 7),
        status: "pending",
        attempts: 1,
        leaseGeneration: 1,
        nextAttemptAt: clock - 11 * MINUTE,
      },
      15 * MINUTE,
      clock,
    );
    const run = await cronRun(clock, withOnlySources("demo"));
    expect(run.failures).toBeNull();
    expect(run.counts.redrive.overdueReenqueued).toBe(1);
    expect(await waitForStatus("demo", eventKey, ["processed"])).toBe("processed");
    expect((await account(accountId))?.credits).toBe(7);
    // Nothing is left to find, and the effect is not applied again.
    expect((await cronRun(clock + 11 * MINUTE, withOnlySources("demo"))).counts.redrive.overdueReenqueued).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await row(receiptId))?.status).toBe("processed");
    expect((await account(accountId))?.credits).toBe(7);
  });

  it("keeps one message in flight for a receipt of a broken source: the consumer's wait is a due time the re-drive respects", async () => {
    const now = Date.now();
    const eventKey = `msg_broken_source_${unique()}`;
    // Relayed 20 minutes ago, its message bouncing off a source whose table is broken ever since.
    const receiptId = await storedReceipt(eventKey, { status: "pending" }, 20 * MINUTE, now);
    const sources = env.SOURCES as Record<string, Record<string, unknown>>;
    const brokenEnv = {
      ...env,
      SOURCES: { ...sources, [SOURCE]: { ...sources[SOURCE], destination: "ftp://nowhere" } },
    } as Env;
    const batch = createMessageBatch<QueuedWork>("webhook-work", [
      { id: "broken-source-1", timestamp: new Date(), attempts: 1, body: { source: SOURCE, receiptIds: [receiptId] } },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, brokenEnv, ctx);
    // The consumer sent the receipt back as a new message and acknowledged the one it was given.
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["broken-source-1"]);
    const waiting = await env.DB.prepare(
      "SELECT status, attempts, next_attempt_at AS nextAttemptAt FROM receipts WHERE id = ?",
    )
      .bind(receiptId)
      .first<{ status: string; attempts: number; nextAttemptAt: number | null }>();
    expect(waiting).toMatchObject({ status: "pending", attempts: 0 });
    // The wait is on record: the message that comes back is due then, and until then it is the one in flight.
    expect(waiting!.nextAttemptAt).toBeGreaterThan(now);

    // So the cron, which takes a never-attempted receipt this old for one whose message was lost, sends no copy.
    const run = await cronRun(Date.now(), CRON_ENV);
    expect(run.failures).toBeNull();
    const after = await env.DB.prepare("SELECT next_attempt_at AS nextAttemptAt FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first<{ nextAttemptAt: number }>();
    expect(after!.nextAttemptAt).toBe(waiting!.nextAttemptAt);
    expect(run.counts.redrive.overdueReenqueued).toBe(0);
  });

  it("sends no copy of a backlog the consumer is merely behind on, and re-drives it once the consumer has reached past it", async () => {
    const clock = laterClock();
    // The newest probe the cron sent (ten minutes ago by the wall clock) is still unhandled: the consumer is behind.
    // The last one it handled was sent an hour before this run.
    await writeCheckpoint(
      env,
      "*",
      "queue-probe-sent",
      { sentAt: clock - 10 * MINUTE, wallAt: Date.now() - 10 * MINUTE },
      clock,
    );
    await writeCheckpoint(env, "*", "queue-probe-handled", { sentAt: clock - HOUR }, clock);
    // Relayed after the handled probe: its message is somewhere in the backlog ahead of the consumer.
    const inBacklog = `msg_backlog_${unique()}`;
    const inBacklogId = await storedReceipt(inBacklog, { status: "pending" }, 20 * MINUTE, clock);
    // Relayed before it: the consumer has been past it, so its message was lost.
    const lost = `msg_behind_probe_${unique()}`;
    await storedReceipt(lost, { status: "pending" }, 70 * MINUTE, clock);

    // (Counts would include earlier tests' receipts, due again at this later clock: these two are what matter.)
    const run = await cronRun(clock, CRON_ENV);
    expect(run.failures).toBeNull();
    expect(await waitForStatus(SOURCE, lost, ["skipped"])).toBe("skipped");
    expect(await row(inBacklogId)).toMatchObject({ status: "pending", nextAttemptAt: null });

    // The run sent a probe of its own; the real consumer handles it once everything sent before it is delivered.
    await eventually(async () =>
      (await readCheckpoint<{ sentAt: number }>(env, "*", "queue-probe-handled"))?.sentAt === clock ? true : undefined,
    );
    // Caught up, and the backlog receipt never came: now it is lost, and the next run sends it.
    const next = await cronRun(clock + 1000, CRON_ENV);
    expect(next.failures).toBeNull();
    expect(next.counts.redrive.overdueReenqueued).toBeGreaterThanOrEqual(1);
    expect(await waitForStatus(SOURCE, inBacklog, ["skipped"])).toBe("skipped");
  });
});
