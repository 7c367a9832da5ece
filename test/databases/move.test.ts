import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { utf8Bytes } from "../../src/crypto/encoding";
import worker from "../../src/index";
import { ulid } from "../../src/lib/ulid";
import type { QueuedWork } from "../../src/model/work-message";
import { cronObservations } from "../../src/monitor/conditions";
import { systemMonitor } from "../../src/monitor/report";
import { receiptDatabaseBindings } from "../../src/sources/databases";
import { adminGet, adminPost } from "../admin/support";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique } from "../reconcile/support";
import { credit, eventually } from "../support/deliveries";

/**
 * A source moved between databases: `second-db` says `database = "DB_SECOND"` today, and the receipts seeded here
 * in DB are what it left there when it lived in DB (its config said nothing, or "DB", until the move). Work in
 * flight at the move — a retry waiting on the queue or for the re-drive, a dead letter someone replays — must
 * finish where the receipt is, not be acked as missing because the source's database is another one now.
 */

const SOURCE = "second-db";
type Binding = "DB" | "DB_SECOND";

interface Seeded {
  receiptId: string;
  eventKey: string;
  account: string;
}

/** A receipt of SOURCE in DB, as its relay and consumer left it before the move. */
async function leftInOldDatabase(
  fields: { status: "pending" | "dead"; nextAttemptAt?: number; attempts?: number },
  ageMs = 60_000,
  source = SOURCE,
): Promise<Seeded> {
  const token = unique();
  const now = Date.now();
  const seeded = { receiptId: ulid(now - ageMs), eventKey: `msg_moved_${token}`, account: `acct_moved_${token}` };
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, event_type, subject, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, attempts, lease_generation, last_error)
     VALUES (?, ?, ?, 'account.credited', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(
      seeded.receiptId,
      source,
      seeded.eventKey,
      seeded.account,
      "0".repeat(64),
      utf8Bytes(JSON.stringify(credit(seeded.account, 7))),
      now - ageMs,
      now - ageMs,
      fields.status,
      fields.nextAttemptAt ?? null,
      fields.attempts ?? 1,
      fields.attempts ?? 1,
      "destination answered 503",
    )
    .run();
  return seeded;
}

async function statusIn(binding: Binding, receiptId: string): Promise<string | undefined> {
  return (
    await env[binding].prepare("SELECT status FROM receipts WHERE id = ?").bind(receiptId).first<{ status: string }>()
  )?.status;
}

async function creditsIn(binding: Binding, account: string): Promise<number | undefined> {
  return (
    await env[binding].prepare("SELECT credits FROM accounts WHERE id = ?").bind(account).first<{ credits: number }>()
  )?.credits;
}

/** Processed in DB, where it was left, and its handler's credit applied there once; DB_SECOND never saw it. */
async function finishedInOldDatabase(seeded: Seeded): Promise<void> {
  await eventually(
    async () => ((await statusIn("DB", seeded.receiptId)) === "processed" ? true : undefined),
    20_000,
    `${seeded.receiptId} processed in DB`,
  );
  expect(await creditsIn("DB", seeded.account)).toBe(7);
  expect(await statusIn("DB_SECOND", seeded.receiptId)).toBeUndefined();
  expect(await creditsIn("DB_SECOND", seeded.account)).toBeUndefined();
}

async function runQueue(bodies: QueuedWork[], queue = "webhook-work") {
  const batch = createMessageBatch<QueuedWork>(
    queue,
    bodies.map((body, index) => ({ id: `msg_move_${index}`, timestamp: Date.now(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch, env, ctx);
  return getQueueResult(batch, ctx);
}

describe("moving a source to another database drains what it left in flight", () => {
  it("finishes a retry whose message was sent before the move (the message names no database)", async () => {
    const retry = await leftInOldDatabase({ status: "pending", nextAttemptAt: Date.now() - 1_000 });
    // The shape a consumer sent before messages named their database: in flight across the deploy of the move.
    await env.WORK_QUEUE.send({ source: SOURCE, receiptIds: [retry.receiptId] });
    await finishedInOldDatabase(retry);
  });

  it("finishes an overdue retry the cron re-drives from the old database", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const now = Date.now();
    const overdue = await leftInOldDatabase({ status: "pending", nextAttemptAt: now - 20 * 60_000 }, 30 * 60_000);
    const run = await cronRun(now);
    expect(run.failures).toBeNull();
    expect(run.counts.redrive.overdueReenqueued).toBeGreaterThanOrEqual(1);
    await finishedInOldDatabase(overdue);
  });

  it("finishes a dead letter left in the old database when it is replayed by id", async () => {
    const dead = await leftInOldDatabase({ status: "dead", attempts: 13 });
    const replayed = await adminPost(`/admin/api/receipts/${dead.receiptId}/replay`, {});
    expect(replayed.status).toBe(202);
    await finishedInOldDatabase(dead);
  });

  it("reaches the old database in a bulk replay filtered by the source", async () => {
    const dead = await leftInOldDatabase({ status: "dead", attempts: 13 });
    const replayed = await adminPost("/admin/api/dead/replay", { source: SOURCE });
    expect(replayed.status).toBe(200);
    expect(
      ((await replayed.json()) as { results: { receiptId: string }[] }).results.map((result) => result.receiptId),
    ).toContain(dead.receiptId);
    await finishedInOldDatabase(dead);
  });

  it("finds a receipt left in the old database by its event key", async () => {
    const dead = await leftInOldDatabase({ status: "dead", attempts: 13 });
    const found = await adminGet(`/admin/api/sources/${SOURCE}/events/${dead.eventKey}`);
    expect(found.status).toBe(200);
    expect(((await found.json()) as { receipt: { receiptId: string } }).receipt.receiptId).toBe(dead.receiptId);
  });

  it("counts the dead letters left in the old database in the source's dead-letter alert", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const watched = "second-db-forward";
    const alertOpen = async () =>
      (await env.DB.prepare(
        "SELECT COUNT(*) AS count FROM alerts WHERE source = ? AND kind = 'dead-letters' AND state = 'open'",
      )
        .bind(watched)
        .first<{ count: number }>())!.count;
    // A first run records the source's dead count where it lives now; none is dead there.
    expect((await cronRun(Date.now())).failures).toBeNull();
    expect(await alertOpen()).toBe(0);
    await leftInOldDatabase({ status: "dead", attempts: 13 }, 60_000, watched);
    expect((await cronRun(Date.now() + 1)).failures).toBeNull();
    expect(await alertOpen()).toBe(1);
  });

  it("finds receipts named in a message for a database this Worker no longer binds, and retries loudly what is nowhere", async () => {
    const retry = await leftInOldDatabase({ status: "pending", nextAttemptAt: Date.now() - 1_000 });
    const nowhere = ulid();
    const result = await runQueue([
      { source: SOURCE, database: "DB_REMOVED", receiptIds: [retry.receiptId] },
      { source: SOURCE, database: "DB_REMOVED", receiptIds: [nowhere] },
    ]);
    await finishedInOldDatabase(retry);
    expect(result.explicitAcks).toEqual(["msg_move_0"]);
    expect(result.retryMessages.map((message) => message.msgId)).toEqual(["msg_move_1"]);
    // Loudly: a system alert, not only a log line. It stays open while DB_REMOVED is unbound (a cron run that binds
    // only DB and DB_SECOND leaves it), and the cron of a Worker that binds it again resolves it.
    const unboundAlert = async () =>
      (await systemMonitor(env).list()).find((alert) => alert.kind === "database-unbound");
    expect(await unboundAlert()).toMatchObject({ state: "open", reporters: ["database:DB_REMOVED"] });
    expect((await unboundAlert())!.message).toMatch(/DB_REMOVED/);
    await systemMonitor(env).report(
      cronObservations({
        databases: receiptDatabaseBindings(env).map((binding) => ({ binding, reachable: true, sizeBytes: null })),
        failedSteps: [],
      }),
    );
    expect(await unboundAlert()).toMatchObject({ state: "open" });
    await systemMonitor(env).report(
      cronObservations({ databases: [{ binding: "DB_REMOVED", reachable: true, sizeBytes: null }], failedSteps: [] }),
    );
    expect(await unboundAlert()).toMatchObject({ state: "resolved" });
  });

  it("marks a dead letter where it lives when the queue gives up on a message sent before the move", async () => {
    const retry = await leftInOldDatabase({ status: "pending", nextAttemptAt: Date.now() - 1_000 });
    const result = await runQueue([{ source: SOURCE, receiptIds: [retry.receiptId] }], "webhook-work-dead");
    expect(result.explicitAcks).toEqual(["msg_move_0"]);
    expect(await statusIn("DB", retry.receiptId)).toBe("dead");
  });

  it("lists a moved source's receipts left in the database it moved from, filtered by that source", async () => {
    const left = await leftInOldDatabase({ status: "dead", attempts: 13 });
    for (const path of [
      `/admin/api/receipts?source=${SOURCE}&limit=100`,
      `/admin/api/dead?source=${SOURCE}&limit=100`,
    ]) {
      const page = await (await adminGet(path)).json<{ receipts: { receiptId: string }[] }>();
      expect(page.receipts.map((receipt) => receipt.receiptId)).toContain(left.receiptId);
    }
  });

  it("keeps reading a bound database no source names any more", () => {
    const noneInSecond = { ...env, SOURCES: { demo: (env.SOURCES as Record<string, unknown>).demo } } as Env;
    expect(receiptDatabaseBindings(noneInSecond)).toEqual(["DB", "DB_P0", "DB_P1", "DB_P2", "DB_P3", "DB_SECOND"]);
  });
});
