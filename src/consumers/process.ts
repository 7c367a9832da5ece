import { logEvent } from "../lib/log";
import { parseJsonBody } from "../providers/json";
import type { Destination, SourceConfig } from "../sources/config";
import { loadSources } from "../sources/registry";
import { forward } from "./forward";
import { handlerFor } from "./handlers/registry";
import { PermanentFailure, type HandlerPlan } from "./handlers/types";
import { QUEUE_MAX_DELAY_SECONDS, retryDelaySeconds } from "./retry-schedule";

/**
 * Processing one receipt: lease it, run its destination, record the attempt, and decide what happens next.
 * Safe under any number of concurrent or repeated calls for one receipt: the lease keeps a second consumer
 * out while the first is alive, and the processed-key insert makes a second effect impossible even if two
 * do run (a crashed consumer's lease expires; a slow one may still be running).
 */

/** How long one attempt may hold a receipt before another consumer may take it over. */
export const LEASE_MS = 5 * 60_000;

export type ProcessOutcome =
  /** Nothing more to do for this message: ack it. */
  | { kind: "done"; status: string }
  /** Come back later: retry the message after this many seconds. */
  | { kind: "retry"; delaySeconds: number };

interface LeasedReceipt {
  receiptId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  subjectId: string | null;
  version: number | null;
  occurredAt: number | null;
  body: number[] | ArrayBuffer | null;
  keptHeaders: string | null;
  attempts: number;
}

type AttemptResult =
  | { status: "processed" | "skipped"; httpStatus?: number; note?: string }
  | { status: "stale"; againstVersion: number }
  | { status: "retry" | "unknown"; error: string; httpStatus?: number | null; retryAfterSeconds?: number | null }
  | { status: "dead"; error: string; httpStatus?: number };

export async function processReceipt(env: Env, receiptId: string, now = Date.now()): Promise<ProcessOutcome> {
  const receipt = await env.DB.prepare(
    `UPDATE receipts SET status = 'processing', lease_until = ?2, attempts = attempts + 1
     WHERE id = ?1 AND (
       (status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?3))
       OR (status = 'processing' AND lease_until < ?3))
     RETURNING id AS receiptId, source, event_key AS eventKey, event_type AS eventType, subject AS subjectId,
       version, occurred_at AS occurredAt, body, kept_headers AS keptHeaders, attempts`,
  )
    .bind(receiptId, now + LEASE_MS, now)
    .first<LeasedReceipt>();
  if (!receipt) return notLeased(env, receiptId, now);

  const source = loadSources(env).get(receipt.source);
  await env.DB.prepare("INSERT INTO attempts (receipt_id, attempt_number, started_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
    .bind(receipt.receiptId, receipt.attempts, now)
    .run();

  let result: AttemptResult;
  try {
    result = source
      ? await runDestination(env, source.destination, receipt, now)
      : { status: "dead", error: `source ${receipt.source} is no longer configured` };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    result = error instanceof PermanentFailure ? { status: "dead", error: message } : { status: "retry", error: message };
  }
  return finishAttempt(env, receipt, source, result, now);
}

/** Why the lease was not taken, and what the message should do about it. */
async function notLeased(env: Env, receiptId: string, now: number): Promise<ProcessOutcome> {
  const row = await env.DB.prepare("SELECT status, next_attempt_at AS nextAttemptAt, lease_until AS leaseUntil FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ status: string; nextAttemptAt: number | null; leaseUntil: number | null }>();
  if (!row) {
    logEvent("process.receipt_missing", { receipt: receiptId });
    return { kind: "done", status: "missing" };
  }
  if (row.status === "pending" && row.nextAttemptAt !== null) {
    return { kind: "retry", delaySeconds: clampQueueDelay((row.nextAttemptAt - now) / 1000) };
  }
  if (row.status === "processing" && row.leaseUntil !== null) {
    return { kind: "retry", delaySeconds: clampQueueDelay((row.leaseUntil - now) / 1000 + 1) };
  }
  return { kind: "done", status: row.status };
}

async function runDestination(env: Env, destination: Destination, receipt: LeasedReceipt, now: number): Promise<AttemptResult> {
  const body = bodyBytes(receipt.body);
  switch (destination.kind) {
    case "handler": {
      const handler = handlerFor(destination.handlerName);
      if (!handler) return { status: "dead", error: `no handler named ${destination.handlerName}` };
      if (!body) return { status: "dead", error: "payload no longer retained" };
      const plan = await handler(
        {
          receiptId: receipt.receiptId,
          source: receipt.source,
          eventKey: receipt.eventKey,
          eventType: receipt.eventType,
          subjectId: receipt.subjectId,
          version: receipt.version,
          occurredAt: receipt.occurredAt,
          payload: parseJsonBody(body),
        },
        { db: env.DB, env },
      );
      return commitPlan(env, receipt, plan, now);
    }
    case "forward": {
      if (!body) return { status: "dead", error: "payload no longer retained" };
      const secret = (env as unknown as Record<string, unknown>)[env.GATEWAY_SIGNING_SECRET_NAME];
      if (typeof secret !== "string") return { status: "retry", error: `secret ${env.GATEWAY_SIGNING_SECRET_NAME} is not set` };
      const headers = receipt.keptHeaders ? (JSON.parse(receipt.keptHeaders) as Record<string, string>) : {};
      const forwarded = await forward(
        {
          url: destination.url,
          timeoutMs: destination.timeoutMs,
          receiptId: receipt.receiptId,
          source: receipt.source,
          eventKey: receipt.eventKey,
          eventType: receipt.eventType,
          body,
          contentType: headers["content-type"] ?? "application/json",
        },
        secret,
        now,
      );
      switch (forwarded.kind) {
        case "delivered":
          return commitPlan(env, receipt, { outcome: "apply", statements: [] }, now, forwarded.httpStatus);
        case "transient":
          return { status: "retry", error: forwarded.error, httpStatus: forwarded.httpStatus, retryAfterSeconds: forwarded.retryAfterSeconds };
        case "unknown":
          return { status: "unknown", error: forwarded.error };
        case "permanent":
          return { status: "dead", error: forwarded.error, httpStatus: forwarded.httpStatus };
      }
    }
    case "none":
      return commitPlan(env, receipt, { outcome: "skip", reason: "source has no destination" }, now);
  }
}

/**
 * The effect and the processed-key commit together: the processed_events insert runs first in the batch, so on a
 * second run of the same event it fails and the whole batch — the handler's writes included — rolls back.
 */
async function commitPlan(env: Env, receipt: LeasedReceipt, plan: HandlerPlan, now: number, httpStatus?: number): Promise<AttemptResult> {
  const status = plan.outcome === "apply" ? "processed" : plan.outcome === "stale" ? "stale" : "skipped";
  const statements = plan.outcome === "apply" ? plan.statements : [];
  const staleAgainst = plan.outcome === "stale" ? plan.againstVersion : null;
  const guard = env.DB.prepare("INSERT INTO processed_events (source, event_key, receipt_id, processed_at) VALUES (?, ?, ?, ?)").bind(
    receipt.source,
    receipt.eventKey,
    receipt.receiptId,
    now,
  );
  const markDone = env.DB.prepare(
    `UPDATE receipts SET status = ?, processed_at = ?, lease_until = NULL, next_attempt_at = NULL, last_error = NULL,
       stale_against_version = ? WHERE id = ?`,
  ).bind(status, now, staleAgainst, receipt.receiptId);
  let results: D1Result[];
  try {
    results = await env.DB.batch([guard, ...statements, markDone]);
  } catch (error) {
    if (error instanceof Error && /UNIQUE constraint failed: processed_events/.test(error.message)) {
      // Another run of this event already committed its effect. Nothing was applied now.
      await env.DB.prepare(
        "UPDATE receipts SET status = 'processed', lease_until = NULL WHERE id = ? AND status = 'processing'",
      ).bind(receipt.receiptId).run();
      return { status: "processed", note: "already processed by an earlier run" };
    }
    throw error;
  }
  if (plan.outcome === "apply" && plan.guardedStatement !== undefined) {
    const guarded = results[1 + plan.guardedStatement];
    if (guarded && guarded.meta.changes === 0) {
      // A newer version landed between the handler's read and this write; the WHERE kept it. Say so.
      const current = plan.guardedVersion ?? 0;
      await env.DB.prepare("UPDATE receipts SET status = 'stale', stale_against_version = ? WHERE id = ?")
        .bind(current, receipt.receiptId)
        .run();
      return { status: "stale", againstVersion: current };
    }
  }
  if (plan.outcome === "stale") return { status: "stale", againstVersion: plan.againstVersion };
  return { status: plan.outcome === "apply" ? "processed" : "skipped", httpStatus, note: plan.outcome === "skip" ? plan.reason : undefined };
}

async function finishAttempt(
  env: Env,
  receipt: LeasedReceipt,
  source: SourceConfig | undefined,
  result: AttemptResult,
  startedAt: number,
): Promise<ProcessOutcome> {
  const finishedAt = Date.now();
  let outcome: ProcessOutcome;
  let recorded: string = result.status;
  let error: string | null = "error" in result ? result.error : null;
  const httpStatus = "httpStatus" in result ? (result.httpStatus ?? null) : null;

  if (result.status === "retry" || result.status === "unknown") {
    const policy = source?.retry;
    const retriesUsed = receipt.attempts - 1;
    if (!policy || retriesUsed >= policy.maxRetries) {
      recorded = "dead";
      error = `gave up after ${receipt.attempts} attempts: ${result.error}`;
      await markDead(env, receipt.receiptId, error);
      outcome = { kind: "done", status: "dead" };
    } else {
      const computed = retryDelaySeconds(policy, receipt.attempts);
      const retryAfter = result.status === "retry" ? (result.retryAfterSeconds ?? null) : null;
      const delaySeconds = retryAfter !== null ? Math.min(Math.max(retryAfter, 1), policy.maxDelaySeconds) : computed;
      await env.DB.prepare(
        "UPDATE receipts SET status = 'pending', lease_until = NULL, next_attempt_at = ?, last_error = ? WHERE id = ? AND status = 'processing'",
      )
        .bind(finishedAt + delaySeconds * 1000, result.error, receipt.receiptId)
        .run();
      outcome = { kind: "retry", delaySeconds: clampQueueDelay(delaySeconds) };
    }
  } else if (result.status === "dead") {
    await markDead(env, receipt.receiptId, result.error);
    outcome = { kind: "done", status: "dead" };
  } else {
    outcome = { kind: "done", status: result.status };
  }

  await env.DB.prepare(
    "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, error = ?, duration_ms = ? WHERE receipt_id = ? AND attempt_number = ?",
  )
    .bind(finishedAt, recorded, httpStatus, error, finishedAt - startedAt, receipt.receiptId, receipt.attempts)
    .run();
  logEvent("attempt", {
    source: receipt.source,
    eventKey: receipt.eventKey,
    eventType: receipt.eventType,
    receipt: receipt.receiptId,
    attempt: receipt.attempts,
    outcome: recorded,
    httpStatus,
    error,
    durationMs: finishedAt - startedAt,
  });
  return outcome;
}

export async function markDead(env: Env, receiptId: string, error: string): Promise<void> {
  await env.DB.prepare(
    "UPDATE receipts SET status = 'dead', lease_until = NULL, next_attempt_at = NULL, last_error = ? WHERE id = ? AND status IN ('pending', 'processing')",
  )
    .bind(error, receiptId)
    .run();
}

function clampQueueDelay(seconds: number): number {
  return Math.min(QUEUE_MAX_DELAY_SECONDS, Math.max(0, Math.ceil(seconds)));
}

/** D1 returns BLOB columns as arrays of byte values. */
function bodyBytes(body: LeasedReceipt["body"]): Uint8Array | null {
  if (body === null) return null;
  return body instanceof ArrayBuffer ? new Uint8Array(body) : Uint8Array.from(body);
}
