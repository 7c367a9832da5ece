import { env } from "cloudflare:workers";
import { expect } from "vitest";
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

export async function lane(name: string): Promise<LaneRequest[]> {
  return (await fetch(`${standinOrigin()}/__lane/${name}`)).json<LaneRequest[]>();
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
