import { env, exports } from "cloudflare:workers";
import { database } from "../../src/db/client";
import { alerts, attempts, receipts } from "../../src/db/schema";
import { ulid } from "../../src/lib/ulid";
import { post, signDemo } from "../support/deliveries";

export const ADMIN = { authorization: `Bearer ${env.ADMIN_TOKEN}` };

export function adminGet(path: string, headers: Record<string, string> = ADMIN): Promise<Response> {
  return exports.default.fetch(new Request(`https://receiver.test${path}`, { headers }));
}

export function adminPost(path: string, body: unknown, headers: Record<string, string> = ADMIN): Promise<Response> {
  return exports.default.fetch(
    new Request(`https://receiver.test${path}`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { ...headers, "content-type": "application/json" },
    }),
  );
}

/** Signs and posts to any source that shares the demo secret (the admin fixtures all do). */
export function deliverTo(source: string, webhookId: string, payload: unknown): Promise<Response> {
  const body = JSON.stringify(payload);
  return post(`/webhooks/${source}`, body, signDemo(webhookId, body));
}

/** A source name no other test file uses, so assertions about counts see only this test's rows. */
export function uniqueSource(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

type ReceiptRow = typeof receipts.$inferInsert;

/** Writes a receipt row straight into D1, as the relay would have, with whatever history the test needs. */
export async function seedReceipt(row: Partial<ReceiptRow> & { source: string; receivedAt: number }): Promise<string> {
  const receiptId = row.receiptId ?? ulid(row.receivedAt);
  await database(env)
    .insert(receipts)
    .values({ eventKey: `evt_${receiptId}`, payloadSha256: "0".repeat(64), status: "pending", ...row, receiptId });
  return receiptId;
}

export async function seedAttempt(row: typeof attempts.$inferInsert): Promise<void> {
  await database(env).insert(attempts).values(row);
}

export async function seedAlert(
  row: Partial<typeof alerts.$inferInsert> & { kind: string; openedAt: number },
): Promise<string> {
  const alertId = ulid(row.openedAt);
  await database(env)
    .insert(alerts)
    .values({ state: "open", ...row, alertId });
  return alertId;
}

/** The dashboard's origin: its form posts must come from it (the CSRF check). */
export const DASHBOARD_ORIGIN = "https://receiver.test";

/** A dashboard request as a browser sends it: redirects are answers to look at, not to follow. */
export function dashboardPage(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(new Request(`${DASHBOARD_ORIGIN}${path}`, { redirect: "manual", ...init }));
}

/** Signs in with the admin token; returns the session as a request cookie. */
export async function dashboardSession(): Promise<string> {
  const response = await dashboardPage("/admin/login", {
    method: "POST",
    body: new URLSearchParams({ token: env.ADMIN_TOKEN }),
    headers: { "content-type": "application/x-www-form-urlencoded", origin: DASHBOARD_ORIGIN },
  });
  return response.headers.get("set-cookie")!.split(";")[0]!;
}
