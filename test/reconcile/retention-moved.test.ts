import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import { readShardKeeps } from "../../src/reconcile/shard-keep";
import { credit } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique } from "./support";

/**
 * Retention in the database a source moved away from (docs/reconciler.md "Retention", docs/processing.md "A source
 * that moves between databases"): `second-db` says `database = "DB_SECOND"` today, and the receipts seeded here in
 * DB are what it left there when it lived in DB. The cron's scheduled handler expires them on that source's
 * retention (payload 7 days, dedupe 35 days, dead letters as long as their key), as it does the receipts where it
 * lives now.
 */

const SOURCE = "second-db";
const DAY = 86_400_000;

async function leftInOldDatabase(
  status: string,
  ageMs: number,
  now: number,
  eventKey = `msg_ret_moved_${unique()}`,
): Promise<string> {
  const receiptId = ulid(now - ageMs);
  const account = `acct_ret_moved_${unique()}`;
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, event_type, subject, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, attempts, lease_generation)
     VALUES (?, ?, ?, 'account.credited', ?, ?, ?, ?, ?, ?, ?, 1, 1)`,
  )
    .bind(
      receiptId,
      SOURCE,
      eventKey,
      account,
      "0".repeat(64),
      utf8Bytes(JSON.stringify(credit(account, 1))),
      now - ageMs,
      now - ageMs,
      status,
      // A pending one is a retry due in an hour: the re-drive leaves it alone, so it stays unfinished for the run.
      status === "pending" ? now + 3_600_000 : null,
    )
    .run();
  return receiptId;
}

async function bodyKept(receiptId: string): Promise<boolean | undefined> {
  const row = await env.DB.prepare("SELECT body IS NOT NULL AS kept FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ kept: number }>();
  return row === null ? undefined : row.kept === 1;
}

describe("retention in the database a source moved away from", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("drops the bodies past payload retention and the keys past dedupe retention that the source left there", async () => {
    const now = Date.now();
    const pastPayload = await leftInOldDatabase("processed", 10 * DAY, now);
    const pastKey = await leftInOldDatabase("processed", 40 * DAY, now);
    const deadLetter = await leftInOldDatabase("dead", 10 * DAY, now);
    const recent = await leftInOldDatabase("processed", DAY, now);

    const run = await cronRun(now);
    expect(run.failures).toBeNull();

    expect(await bodyKept(pastPayload)).toBe(false);
    expect(await bodyKept(pastKey)).toBeUndefined();
    // As where it lives: a dead letter keeps its body for replay, a receipt within payload retention keeps its own.
    expect(await bodyKept(deadLetter)).toBe(true);
    expect(await bodyKept(recent)).toBe(true);
  });

  it("tells the claim shards to keep the key of a receipt still unfinished there, past its dedupe retention", async () => {
    const now = Date.now();
    const eventKey = `msg_ret_moved_pending_${unique()}`;
    const unfinished = await leftInOldDatabase("pending", 40 * DAY, now, eventKey);

    const run = await cronRun(now);
    expect(run.failures).toBeNull();

    expect(await env.DB.prepare("SELECT id FROM receipts WHERE id = ?").bind(unfinished).first()).not.toBeNull();
    // The source lives in DB_SECOND, whose own key scan keeps nothing of it: the shards go by both databases' scans.
    expect((await readShardKeeps(env)).get(SOURCE)?.keys).toContain(eventKey);
  });
});
