import { runInDurableObject } from "cloudflare:test";
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
async function storedReceipt(eventKey: string, fields: { status: string; enqueuedAt: number | null; leaseUntil?: number; attempts?: number }, ageMs: number, now: number) {
  const receiptId = ulid(now - ageMs);
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, payload_sha256, body, received_at, relayed_at, enqueued_at, status, lease_until, attempts)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(receiptId, SOURCE, eventKey, "0".repeat(64), utf8Bytes("{}"), now - ageMs, now - ageMs, fields.enqueuedAt, fields.status, fields.leaseUntil ?? null, fields.attempts ?? 0)
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

  it("re-enqueues a pending receipt whose message never came, and takes back an expired lease", async () => {
    const now = Date.now();
    const overdue = `msg_overdue_${unique()}`;
    const leased = `msg_leased_${unique()}`;
    const fresh = `msg_fresh_${unique()}`;
    await storedReceipt(overdue, { status: "pending", enqueuedAt: null }, 20 * MINUTE, now);
    const leasedId = await storedReceipt(leased, { status: "processing", enqueuedAt: now - 7 * MINUTE, leaseUntil: now - MINUTE, attempts: 1 }, 7 * MINUTE, now);
    await env.DB.prepare("INSERT INTO attempts (receipt_id, attempt_number, started_at) VALUES (?, 1, ?)").bind(leasedId, now - 6 * MINUTE).run();
    // Enqueued a minute ago and not yet consumed: within the grace period, so left alone.
    await storedReceipt(fresh, { status: "pending", enqueuedAt: now - MINUTE }, MINUTE, now);

    const run = await cronRun(now);
    expect(run.failures).toBeNull();
    expect(run.counts.redrive.overdueReenqueued).toBeGreaterThanOrEqual(1);
    expect(run.counts.redrive.expiredLeasesReturned).toBeGreaterThanOrEqual(1);

    expect(await waitForStatus(SOURCE, overdue, ["skipped"])).toBe("skipped");
    expect(await waitForStatus(SOURCE, leased, ["skipped"])).toBe("skipped");
    // The attempt row is finished just after the receipt's status is written.
    const attempts = await eventually(async () => {
      const rows = await env.DB.prepare("SELECT attempt_number AS attemptNumber, outcome, error FROM attempts WHERE receipt_id = ? ORDER BY attempt_number")
        .bind(leasedId)
        .all<{ attemptNumber: number; outcome: string | null; error: string | null }>();
      return rows.results.every((row) => row.outcome !== null) ? rows.results : undefined;
    });
    expect(attempts).toEqual([
      { attemptNumber: 1, outcome: "unknown", error: "lease expired before the attempt finished" },
      { attemptNumber: 2, outcome: "skipped", error: null },
    ]);
    expect((await receipt(SOURCE, fresh))?.status).toBe("pending");
  });
});
