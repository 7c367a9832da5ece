import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import { processBatch } from "../../src/consumers/receipts/process";
import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import { envForDatabase } from "../../src/sources/databases";
import { unique } from "../reconcile/support";
import { credit, eventually, post, signDemo } from "../support/deliveries";
import { keysOf, lane } from "./gate-support";

/**
 * `ordered_by` across a database move (docs/routing.md "Ordering", docs/processing.md "A source that moves between
 * databases"): order-moved and order-moved-routes (test/fixtures/sources/ordering-moved.json) say
 * `database = "DB_SECOND"` today; the earlier event seeded here in DB is what each left there, still retrying, when it
 * lived in DB. A later event of the same subject, posted to the real route, relayed into DB_SECOND and consumed from
 * the queue, must wait for it: the order is the source's, not one database's.
 */

const HOUR = 3_600_000;

interface Row {
  status: string;
  attempts: number;
  nextAttemptAt: number | null;
}

/** The earlier event, left in DB by the move: its first attempt failed, its retry is due in an hour. */
async function retryingInOldDatabase(source: string, account: string, route: string | null): Promise<string> {
  const now = Date.now();
  const receiptId = ulid(now - 60_000);
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, event_type, subject, payload_sha256, body, received_at, relayed_at,
       status, next_attempt_at, attempts, lease_generation, last_error, route, filtered_routes, ordering_key)
     VALUES (?, ?, ?, 'account.credited', ?, ?, ?, ?, ?, ?, ?, 1, 1, 'destination answered 503', ?, ?, ?)`,
  )
    .bind(
      receiptId,
      source,
      `msg_moved_${unique()}`,
      account,
      "0".repeat(64),
      utf8Bytes(JSON.stringify(credit(account, 1))),
      now - 60_000,
      now - 60_000,
      // Several routes: the receipt's own (crm, unordered) went; its ledger delivery is the one retrying.
      route === null ? "pending" : "processed",
      route === null ? now + HOUR : null,
      route,
      route === null ? null : "",
      account,
    )
    .run();
  return receiptId;
}

/** Posts one signed event of `account` to `source`; its receipt id once it is in DB_SECOND. */
async function sendToMoved(source: string, account: string): Promise<string> {
  const key = `moved_${unique()}`;
  const body = JSON.stringify(credit(account, 2));
  expect((await post(`/webhooks/${source}`, body, signDemo(key, body))).status).toBe(200);
  return eventually(
    async () =>
      (
        await env.DB_SECOND.prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
          .bind(source, key)
          .first<{ id: string }>()
      )?.id,
    15_000,
    "receipt in DB_SECOND",
  );
}

/** The row once the consumer is done with it: its attempt over (attempts > 0), or held (due again, no attempt). */
async function decided(read: () => Promise<Row | null>): Promise<Row> {
  return eventually(
    async () => {
      const row = await read();
      return row && row.status !== "processing" && (row.attempts > 0 || row.nextAttemptAt !== null) ? row : undefined;
    },
    30_000,
    "the consumer's decision",
  );
}

const receiptIn = (database: D1Database, receiptId: string) => () =>
  database
    .prepare("SELECT status, attempts, next_attempt_at AS nextAttemptAt FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<Row>();

const deliveryIn = (database: D1Database, receiptId: string, route: string) => () =>
  database
    .prepare(
      "SELECT status, attempts, next_attempt_at AS nextAttemptAt FROM deliveries WHERE receipt_id = ? AND route = ?",
    )
    .bind(receiptId, route)
    .first<Row>();

const held = { status: "pending", attempts: 0 };

describe("ordered_by on a source that moved to another database", () => {
  it("holds a later event in the new database while an earlier one of its subject still retries in the old one", {
    timeout: 60_000,
  }, async () => {
    const account = `acct_mv_${unique()}`;
    const earlier = await retryingInOldDatabase("order-moved", account, null);
    const later = await sendToMoved("order-moved", account);
    expect(await decided(receiptIn(env.DB_SECOND, later))).toMatchObject(held);

    // The earlier one's retry goes through where it lives; then the later one goes, after it.
    const inOld = envForDatabase(env, "DB");
    expect((await processBatch(inOld, [earlier], Date.now() + 2 * HOUR)).get(earlier)).toMatchObject({ kind: "done" });
    const inNew = envForDatabase(env, "DB_SECOND");
    expect((await processBatch(inNew, [later], Date.now() + 3 * HOUR)).get(later)).toMatchObject({ kind: "done" });
    const arrived = keysOf(await lane("order-moved")).filter((key) => key === earlier || key === later);
    expect(arrived).toEqual([earlier, later]);
  });

  it("holds a later event's further delivery while the earlier one's still retries in the old database", {
    timeout: 60_000,
  }, async () => {
    const account = `acct_mvr_${unique()}`;
    const earlier = await retryingInOldDatabase("order-moved-routes", account, "crm");
    await env.DB.prepare(
      `INSERT INTO deliveries (receipt_id, route, status, attempts, lease_generation, next_attempt_at, last_error, ordering_key)
       VALUES (?, 'ledger', 'pending', 1, 1, ?, 'destination answered 503', ?)`,
    )
      .bind(earlier, Date.now() + HOUR, account)
      .run();
    const later = await sendToMoved("order-moved-routes", account);
    // The unordered route goes at once; the ordered one waits for the earlier event's ledger delivery.
    expect(await decided(receiptIn(env.DB_SECOND, later))).toMatchObject({ status: "processed", attempts: 1 });
    expect(await decided(deliveryIn(env.DB_SECOND, later, "ledger"))).toMatchObject(held);

    const inOld = envForDatabase(env, "DB");
    expect((await processDeliveries(inOld, "ledger", [earlier], Date.now() + 2 * HOUR)).get(earlier)).toMatchObject({
      kind: "done",
    });
    const inNew = envForDatabase(env, "DB_SECOND");
    expect((await processDeliveries(inNew, "ledger", [later], Date.now() + 3 * HOUR)).get(later)).toMatchObject({
      kind: "done",
    });
    const arrived = keysOf(await lane("order-moved-ledger")).filter(
      (key) => key === `${earlier}:ledger` || key === `${later}:ledger`,
    );
    expect(arrived).toEqual([`${earlier}:ledger`, `${later}:ledger`]);
  });
});
