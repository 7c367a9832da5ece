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

/**
 * How long a wait on the pipeline may take before it fails, named and generous on purpose: a quiet run sees the
 * pipeline finish in a second or two and never waits this out, while two test files at once (vitest.config.ts,
 * maxWorkers) on a 2-core machine at a load average of 8 or more have taken tens of seconds. A test holds what
 * happened, never how fast: the limit only decides how long a real failure takes to be reported.
 */
export const PIPELINE_WAIT_MS = 60_000;
/** Between two polls: short, since a poll is one cheap read. */
const POLL_INTERVAL_MS = 50;

/** Polls until `check` returns a value (not undefined), or fails naming `what` after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = PIPELINE_WAIT_MS,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
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
    PIPELINE_WAIT_MS,
    `${source}/${eventKey} to reach ${statuses.join("|")}`,
  );
}

export async function account(accountId: string) {
  return env.DB.prepare("SELECT id, credits, plan, plan_version AS planVersion FROM accounts WHERE id = ?")
    .bind(accountId)
    .first<{ id: string; credits: number; plan: string | null; planVersion: number }>();
}
