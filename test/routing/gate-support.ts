import { env, exports } from "cloudflare:workers";
import { expect } from "vitest";
import type { QueuedWork } from "../../src/model/work-message";
import { isD1Database } from "../../src/sources/d1-binding";
import { ADMIN } from "../admin/support";
import { standinOrigin } from "../consumers/support/processing";
import { eventually, post, signDemo } from "../support/deliveries";

/**
 * The delivery-control tests' view of the Node stand-in's lanes (test/setup/global/forward-standin.ts): what arrived
 * in a lane, and how many of the lane's requests were open at once.
 */

export interface LaneRequest {
  headers: Record<string, string>;
  receivedAt: number;
  openOnArrival: number;
  answer: number;
}

/**
 * What arrived in a lane for this test file's own receipts, in arrival order. The stand-in is one Node server for
 * the whole run and test files run two at a time (vitest.config.ts, maxWorkers), each in its own workerd with its
 * own D1: a request belongs to this file when its Idempotency-Key (a receipt id, or `<receipt id>:<route>`) names a
 * receipt in this file's D1. Receipt ids are ULIDs, never shared between files.
 */
export async function lane(name: string): Promise<LaneRequest[]> {
  const arrived = await (await fetch(`${standinOrigin()}/__lane/${name}`)).json<LaneRequest[]>();
  const own = await ownReceipts(arrived.map((request) => receiptOfKey(request.headers["idempotency-key"])));
  return arrived.filter((request) => own.has(receiptOfKey(request.headers["idempotency-key"])));
}

const receiptOfKey = (key: string | undefined) => key?.split(":")[0] ?? "";

/**
 * Which of these receipt ids are receipts in this file's databases: every D1 binding, since a source's receipts may
 * live in any of them (src/sources/databases.ts). Chunked under D1's limit of 100 bound parameters a query.
 */
async function ownReceipts(receiptIds: readonly string[]): Promise<Set<string>> {
  const unique = [...new Set(receiptIds)].filter((id) => id !== "");
  const databases = Object.values(env as unknown as Record<string, unknown>).filter(isD1Database);
  const own = new Set<string>();
  for (let start = 0; start < unique.length; start += 90) {
    const chunk = unique.slice(start, start + 90);
    for (const database of databases) {
      const { results } = await database
        .prepare(`SELECT id FROM receipts WHERE id IN (${chunk.map(() => "?").join(", ")})`)
        .bind(...chunk)
        .all<{ id: string }>();
      for (const { id } of results) own.add(id);
    }
  }
  return own;
}

export async function setLane(name: string, status: number): Promise<void> {
  await fetch(`${standinOrigin()}/__lane/${name}?status=${status}`, { method: "PUT" });
}

/** Posts one signed event to the real route; returns its receipt id once the receipt exists. */
export function send(source: string, n: number): Promise<string> {
  return sendCredit(source, { account: `acct_${n}`, amount: n });
}

/** Posts one signed `account.credited` event carrying `data`; returns its receipt id once the receipt is in D1. */
export async function sendCredit(source: string, data: Record<string, unknown>): Promise<string> {
  const key = `lane_${crypto.randomUUID()}`;
  const body = JSON.stringify({ type: "account.credited", data });
  expect((await post(`/webhooks/${source}`, body, signDemo(key, body))).status).toBe(200);
  return eventually(
    async () =>
      (
        await env.DB.prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
          .bind(source, key)
          .first<{ id: string }>()
      )?.id,
    15_000,
    "receipt",
  );
}

export const keysOf = (requests: readonly LaneRequest[]) =>
  requests.map((request) => request.headers["idempotency-key"]);

export interface DeliveryRow {
  status: string;
  attempts: number;
  nextAttemptAt: number | null;
}

/** A further delivery's own row (migrations/0014), or null when the event has none for that route. */
export async function deliveryRow(receiptId: string, route: string): Promise<DeliveryRow | null> {
  return env.DB.prepare(
    "SELECT status, attempts, next_attempt_at AS nextAttemptAt FROM deliveries WHERE receipt_id = ? AND route = ?",
  )
    .bind(receiptId, route)
    .first<DeliveryRow>();
}

/** Pauses or resumes one route through the admin API (POST /admin/api/sources/<source>/routes/<route>/pause|resume). */
export function changeRoute(source: string, route: string, what: "pause" | "resume"): Promise<Response> {
  return exports.default.fetch(
    new Request(`https://receiver.test/admin/api/sources/${source}/routes/${route}/${what}`, {
      method: "POST",
      headers: ADMIN,
    }),
  );
}

/** Pauses the route (the answer says so), then sends `count` events to its source: their receipt ids, in sent order. */
export async function pauseThenSend(source: string, route: string, count: number): Promise<string[]> {
  const paused = await changeRoute(source, route, "pause");
  expect(paused.status).toBe(200);
  expect(await paused.json()).toMatchObject({ source, route, gate: { paused: true } });
  const receiptIds: string[] = [];
  for (let n = 0; n < count; n++) receiptIds.push(await send(source, n));
  return receiptIds;
}

/**
 * An event of `account` that its lane refuses for good (the body's `note`), then, once `whenDead` has seen it dead,
 * two more of that account sent behind it (amounts 1 and 2): the ordered-route tests' dead letter and its followers.
 */
export async function deadThenTwoBehind(
  source: string,
  account: string,
  note: string,
  whenDead: (dead: string) => Promise<void>,
): Promise<{ dead: string; behind: string[] }> {
  const dead = await sendCredit(source, { account, note });
  await whenDead(dead);
  const behind = [await sendCredit(source, { account, amount: 1 }), await sendCredit(source, { account, amount: 2 })];
  return { dead, behind };
}

/** One kind of delivery as the come-back tests see it: a receipt's own route, or a further route's row. */
export interface WaitingDelivery {
  /** The delivery's row once its first attempt failed and it waits out its retry delay; undefined until then. */
  failedOnce(receiptId: string): Promise<DeliveryRow | undefined>;
  processed(receiptId: string): Promise<boolean>;
  /** Makes the delivery due at `at` (as if its delay had passed) and runs it: the verdict it ends with. */
  runDue(receiptId: string, at: number): Promise<unknown>;
}

/**
 * Three events of `account` to `source` while `laneName` answers 503: the first fails first, so it is due first, and
 * two more fail behind it. Then the lane answers 204 and the first delivery's retry is run, and goes through; this
 * returns once the two behind it are processed too, which nothing but a release would do within the hour.
 */
export async function failThenComeBack(
  source: string,
  laneName: string,
  account: string,
  delivery: WaitingDelivery,
): Promise<{ first: string; waiting: string[] }> {
  const failed = (receiptId: string) =>
    eventually(() => delivery.failedOnce(receiptId), 30_000, "a failed first attempt");
  await setLane(laneName, 503);
  const first = await sendCredit(source, { account, amount: 1 });
  const firstDue = (await failed(first)).nextAttemptAt!;
  const waiting = [await sendCredit(source, { account, amount: 2 }), await sendCredit(source, { account, amount: 3 })];
  for (const receiptId of waiting) expect((await failed(receiptId)).nextAttemptAt).toBeGreaterThan(firstDue);

  // Back: the first delivery's retry comes due (at the real clock's now: a release makes the others due at the
  // consumer's now) and goes through.
  await setLane(laneName, 204);
  expect(await delivery.runDue(first, Date.now())).toEqual({ kind: "done", status: "processed" });
  await eventually(
    async () => ((await Promise.all(waiting.map(delivery.processed))).every(Boolean) ? true : undefined),
    60_000,
    "the waiting deliveries processed",
  );
  return { first, waiting };
}

/**
 * A work queue that records what is sent and delivers nothing, for a test that calls a consumer or the cron itself:
 * its sends are seen without a real consumer racing the test for them.
 */
export function recordingQueue(sent: QueuedWork[]): Queue {
  return {
    send: async (body: QueuedWork) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>) => {
      for (const message of messages) sent.push(message.body);
    },
  } as unknown as Queue;
}
