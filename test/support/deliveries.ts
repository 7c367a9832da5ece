import { env, exports } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";

/** Signs with the maintained Standard Webhooks library, so the route is checked against an independent signer. */
export function signDemo(
  webhookId: string,
  body: string,
  timestampSeconds = Math.floor(Date.now() / 1000),
  secret = env.DEMO_WEBHOOK_SECRET,
) {
  const signer = new Webhook(secret);
  return {
    "webhook-id": webhookId,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": signer.sign(webhookId, new Date(timestampSeconds * 1000), body),
    "content-type": "application/json",
  };
}

export function post(path: string, body: string | Uint8Array, headers: Record<string, string>): Promise<Response> {
  return exports.default.fetch(new Request(`https://receiver.test${path}`, { method: "POST", body, headers }));
}

export async function deliverDemo(webhookId: string, payload: unknown, timestampSeconds?: number): Promise<Response> {
  const body = typeof payload === "string" ? payload : JSON.stringify(payload);
  return post("/webhooks/demo", body, signDemo(webhookId, body, timestampSeconds));
}

export const credit = (account: string, amount: number) => ({ type: "account.credited", data: { account, amount } });
export const planChange = (account: string, plan: string, version: number) => ({
  type: "account.plan_changed",
  data: { account, plan, version },
});

/** Polls until `check` returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 15_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function receiptStatus(source: string, eventKey: string): Promise<string | undefined> {
  const row = await env.DB.prepare("SELECT status FROM receipts WHERE source = ? AND event_key = ?")
    .bind(source, eventKey)
    .first<{ status: string }>();
  return row?.status;
}

export async function waitForStatus(
  source: string,
  eventKey: string,
  statuses: string[] = ["processed"],
): Promise<string> {
  return eventually(
    async () => {
      const status = await receiptStatus(source, eventKey);
      return status && statuses.includes(status) ? status : undefined;
    },
    15_000,
    `${source}/${eventKey} to reach ${statuses.join("|")}`,
  );
}

export async function account(accountId: string) {
  return env.DB.prepare("SELECT id, credits, plan, plan_version AS planVersion FROM accounts WHERE id = ?")
    .bind(accountId)
    .first<{ id: string; credits: number; plan: string | null; planVersion: number }>();
}
