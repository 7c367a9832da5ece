import { and, asc, eq, isNull, lt, or } from "drizzle-orm";
import { sendOutbound } from "../consumers/attempt/outbound";
import { utf8Bytes } from "../crypto/encoding";
import { batchEach } from "../db/batch";
import { database } from "../db/client";
import { alerts } from "../db/schema";
import { logError, logEvent } from "../lib/log";
import { secretValue } from "../lib/secrets";
import { ulid } from "../lib/ulid";
import { signStandardWebhook } from "../providers/standard-webhooks";

/**
 * Alerts are incidents in the D1 `alerts` table: opened when a condition starts, resolved when it stops, and
 * announced once each way. A partial unique index allows one open incident per (source, kind), so overlapping
 * runs cannot open two; notifications are claimed row by row before they are sent, so they cannot send two.
 * With ALERT_WEBHOOK_URL set, notices are POSTed there signed with the Standard Webhooks scheme under the gateway
 * signing secret (the same one forwards use); otherwise they are written to the log.
 */

export type AlertKind =
  /** No live delivery for longer than the source's expect_within. */
  | "silence"
  /** More dead receipts than at the last run. */
  | "dead-letters"
  /** The oldest unfinished receipt has waited longer than alert_pending_after. */
  | "pending-age"
  /** Catch-up found events the provider sent (or tried to) that we never received. */
  | "catch-up-missing";

export interface AlertCondition {
  source: string;
  kind: AlertKind;
  firing: boolean;
  /** Human-readable, built from counts and times only: never payloads, headers or secrets. */
  message: string;
  /** Numbers the next evaluation may need (e.g. the dead-letter count when the incident opened). */
  facts?: Record<string, number>;
}

export interface AlertDetail {
  message: string;
  facts?: Record<string, number>;
}

/**
 * Opens or resolves the incident for each condition, in one batch. A firing condition whose incident is already
 * open changes nothing (the partial unique index refuses a second open row); a quiet one resolves it.
 */
export async function applyConditions(
  env: Env,
  conditions: readonly AlertCondition[],
  now: number,
): Promise<{ opened: number; resolved: number }> {
  if (conditions.length === 0) return { opened: 0, resolved: 0 };
  const db = database(env);
  const applied = await batchEach(db, conditions, (condition) =>
    condition.firing
      ? db
          .insert(alerts)
          .values({
            alertId: ulid(now),
            source: condition.source,
            kind: condition.kind,
            state: "open",
            detail: JSON.stringify({
              message: condition.message,
              ...(condition.facts ? { facts: condition.facts } : {}),
            } satisfies AlertDetail),
            openedAt: now,
          })
          .onConflictDoNothing()
      : // An incident lives at least until a run with a later clock: an overlapping run that read the world a
        // moment before another opened it must not resolve it in the same tick.
        db
          .update(alerts)
          .set({ state: "resolved", resolvedAt: now })
          .where(
            and(
              eq(alerts.source, condition.source),
              eq(alerts.kind, condition.kind),
              eq(alerts.state, "open"),
              lt(alerts.openedAt, now),
            ),
          ),
  );
  let opened = 0;
  let resolved = 0;
  for (const { item: condition, result } of applied) {
    if (result.meta.changes === 0) continue;
    if (condition.firing) opened++;
    else resolved++;
  }
  return { opened, resolved };
}

export interface AlertRow {
  alertId: string;
  source: string | null;
  kind: string;
  state: "open" | "resolved";
  detail: string | null;
  openedAt: number;
  resolvedAt: number | null;
  notifiedAt: number | null;
  resolveNotifiedAt: number | null;
}

/** Notices sent per run; the rest (and any that failed) go out on the next run. */
const NOTIFY_BATCH = 20;
const NOTIFY_TIMEOUT_MS = 10_000;

export interface NotifyCounts {
  sent: number;
  logged: number;
  failed: number;
}

export async function sendAlertNotices(env: Env, now: number): Promise<NotifyCounts> {
  const counts: NotifyCounts = { sent: 0, logged: 0, failed: 0 };
  const due: AlertRow[] = await database(env)
    .select()
    .from(alerts)
    .where(or(isNull(alerts.notifiedAt), and(eq(alerts.state, "resolved"), isNull(alerts.resolveNotifiedAt))))
    .orderBy(asc(alerts.openedAt))
    .limit(NOTIFY_BATCH);
  for (const alert of due) {
    // An incident opened and resolved between two runs still announces both, in order; a resolve is never
    // announced before its opening was.
    if (alert.notifiedAt === null && !(await deliverNotice(env, alert, "opened", "notifiedAt", now, counts))) continue;
    if (alert.state === "resolved") await deliverNotice(env, alert, "resolved", "resolveNotifiedAt", now, counts);
  }
  return counts;
}

async function deliverNotice(
  env: Env,
  alert: AlertRow,
  transition: "opened" | "resolved",
  column: "notifiedAt" | "resolveNotifiedAt",
  now: number,
  counts: NotifyCounts,
): Promise<boolean> {
  // Claim first: of two overlapping runs, only the one whose UPDATE changed the row sends.
  const db = database(env);
  const claimed = await db
    .update(alerts)
    .set({ [column]: now })
    .where(and(eq(alerts.alertId, alert.alertId), isNull(alerts[column])));
  if (claimed.meta.changes === 0) return false;
  try {
    const delivered = await notify(env, alert, transition, now);
    if (delivered === "sent") counts.sent++;
    else counts.logged++;
    return true;
  } catch (error) {
    counts.failed++;
    logError("alert.notify_failed", error, { alert: alert.alertId, transition });
    // Released so the next run tries again; the receiver dedupes on webhook-id if the failure was only ours.
    await db
      .update(alerts)
      .set({ [column]: null })
      .where(eq(alerts.alertId, alert.alertId));
    return false;
  }
}

/** One notice, signed and sent (or logged without ALERT_WEBHOOK_URL); the system monitor sends through it too. */
export async function notify(
  env: Env,
  alert: AlertRow,
  transition: "opened" | "resolved",
  now: number,
): Promise<"sent" | "logged"> {
  const detail = alert.detail ? (JSON.parse(alert.detail) as AlertDetail) : { message: "" };
  const url = secretValue(env, "ALERT_WEBHOOK_URL");
  if (url === null) {
    logEvent(`alert.${transition}`, {
      alert: alert.alertId,
      source: alert.source,
      kind: alert.kind,
      message: detail.message,
    });
    return "logged";
  }
  const secret = secretValue(env, env.GATEWAY_SIGNING_SECRET_NAME);
  if (secret === null) {
    throw new Error(`secret ${env.GATEWAY_SIGNING_SECRET_NAME} is not set; alerts are never sent unsigned`);
  }
  const webhookId = `${alert.alertId}.${transition}`;
  // The signature's timestamp is about transport freshness, checked against the receiver's clock: the wall clock,
  // not the run's (injectable) clock, which dates the notice in its body.
  const timestamp = Math.floor(Date.now() / 1000);
  const body = utf8Bytes(
    JSON.stringify({
      type: `alert.${transition}`,
      timestamp: new Date(now).toISOString(),
      data: {
        alertId: alert.alertId,
        source: alert.source,
        kind: alert.kind,
        message: detail.message,
        openedAt: new Date(alert.openedAt).toISOString(),
        resolvedAt: alert.resolvedAt === null ? null : new Date(alert.resolvedAt).toISOString(),
      },
    }),
  );
  // The one outbound path (forwards use it too): timeout, Idempotency-Key, and one classification of answers.
  const result = await sendOutbound({
    url,
    body,
    timeoutMs: NOTIFY_TIMEOUT_MS,
    idempotencyKey: webhookId,
    headers: {
      "content-type": "application/json",
      "webhook-id": webhookId,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": await signStandardWebhook(secret, webhookId, timestamp, body),
    },
  });
  if (result.kind !== "delivered") throw new Error(`alert webhook: ${result.error}`);
  await result.response.body?.cancel();
  return "sent";
}
