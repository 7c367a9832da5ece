import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique } from "../reconcile/support";
import { credit, eventually } from "../support/deliveries";

/**
 * The cron over several databases: re-drive, retention and the dead-letter watch each reach the receipts of a
 * source that lives in DB_SECOND, while alerts stay in DB.
 */

const SOURCE = "second-db";
const DAY = 86_400_000;

async function storeInSecond(
  eventKey: string,
  fields: { status: string; nextAttemptAt?: number; account: string },
  ageMs: number,
  now: number,
): Promise<string> {
  const receiptId = ulid(now - ageMs);
  await env.DB_SECOND.prepare(
    `INSERT INTO receipts (id, source, event_key, event_type, subject, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, attempts, lease_generation)
     VALUES (?, ?, ?, 'account.credited', ?, ?, ?, ?, ?, ?, ?, 0, 0)`,
  )
    .bind(
      receiptId,
      SOURCE,
      eventKey,
      fields.account,
      "0".repeat(64),
      utf8Bytes(JSON.stringify(credit(fields.account, 7))),
      now - ageMs,
      now - ageMs,
      fields.status,
      fields.nextAttemptAt ?? null,
    )
    .run();
  return receiptId;
}

describe("the cron across databases", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("re-drives, expires and watches a second database's receipts, and records its alerts in DB", async () => {
    const now = Date.now();
    const token = unique();
    const account = `acct_cron_split_${token}`;
    const overdue = await storeInSecond(
      `msg_overdue_${token}`,
      { status: "pending", nextAttemptAt: now - 10 * 60_000, account },
      20 * 60_000,
      now,
    );
    const expired = await storeInSecond(
      `msg_expired_${token}`,
      { status: "processed", account: `${account}_old` },
      40 * DAY,
      now,
    );
    const dead = await storeInSecond(`msg_dead_${token}`, { status: "dead", account: `${account}_dead` }, 60_000, now);

    const run = await cronRun(now);
    expect(run.failures).toBeNull();
    expect(run.counts.redrive.overdueReenqueued).toBeGreaterThanOrEqual(1);

    // Re-driven and processed where it lives: the credit lands in DB_SECOND's accounts, never in DB's.
    await eventually(
      async () => {
        const row = await env.DB_SECOND.prepare("SELECT status FROM receipts WHERE id = ?")
          .bind(overdue)
          .first<{ status: string }>();
        return row?.status === "processed" ? true : undefined;
      },
      20_000,
      "the overdue receipt processed in DB_SECOND",
    );
    expect(
      await env.DB_SECOND.prepare("SELECT credits FROM accounts WHERE id = ?")
        .bind(account)
        .first<{ credits: number }>(),
    ).toEqual({ credits: 7 });
    expect(await env.DB.prepare("SELECT credits FROM accounts WHERE id = ?").bind(account).first()).toBeNull();

    // Past the default 35-day dedupe retention: gone from DB_SECOND.
    expect(await env.DB_SECOND.prepare("SELECT id FROM receipts WHERE id = ?").bind(expired).first()).toBeNull();
    expect(await env.DB_SECOND.prepare("SELECT id FROM receipts WHERE id = ?").bind(dead).first()).not.toBeNull();

    // The dead letter, counted in DB_SECOND, opens the source's incident in DB's alerts table.
    const alert = await env.DB.prepare(
      "SELECT state FROM alerts WHERE source = ? AND kind = 'dead-letters' AND state = 'open'",
    )
      .bind(SOURCE)
      .first<{ state: string }>();
    expect(alert).toEqual({ state: "open" });
    expect(await env.DB_SECOND.prepare("SELECT COUNT(*) AS count FROM alerts").first<{ count: number }>()).toEqual({
      count: 0,
    });
  });
});
