import { secretValue } from "../lib/secrets";
import { logEvent } from "../lib/log";
import { parseJsonBody } from "../providers/json";
import type { Destination, SourceConfig } from "../sources/config";
import { loadSources } from "../sources/registry";
import { externalCallsFor } from "./external-calls";
import { forward } from "./forward";
import { storedVersion, VERSION_CLAIM_LOST } from "./handlers/ordering";
import { handlerFor } from "./handlers/registry";
import { OutcomeUnknown, PermanentFailure, TransientFailure, type HandlerPlan } from "./handlers/types";
import { nextRetryDelaySeconds, QUEUE_MAX_DELAY_SECONDS } from "./retry-schedule";

/**
 * Processing one receipt: lease it, run its destination, record the attempt, and decide what happens next.
 * Safe under any number of concurrent or repeated calls for one receipt: the lease keeps a second consumer
 * out while the first is alive, and the processed-key insert makes a second effect impossible even if two
 * do run (a crashed consumer's lease expires; a slow one may still be running).
 *
 * `receipts.attempts` counts the attempts of the current run (since relay or the last replay) and is the
 * lease's fencing token: every state change after the lease is conditional on it, so a consumer whose lease
 * was taken over cannot move the receipt under its successor. The attempts table numbers every attempt ever.
 * The state machine is drawn in docs/processing.md.
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
  /** This run's attempt count, including the one just leased: the fencing token. */
  attempts: number;
}

type AttemptResult =
  | { status: "processed" | "skipped"; httpStatus?: number | null; note?: string }
  | { status: "stale"; againstVersion: number; note?: string }
  /** The event's effect was committed by an earlier run (a replay, or a lease taken over): nothing applied now. */
  | { status: "duplicate"; receiptStatus: string }
  | { status: "retry" | "unknown"; error: string; httpStatus?: number | null; retryAfterSeconds?: number | null }
  | { status: "dead"; error: string; httpStatus?: number | null };

const MAX_ERROR_CHARS = 500;

/**
 * @param now the attempt's start (epoch ms). Injected by tests to step through the retry schedule; elapsed real
 * time is added to it for the attempt's end, so durations stay true.
 */
export async function processReceipt(env: Env, receiptId: string, now = Date.now()): Promise<ProcessOutcome> {
  // Read the configuration before taking the lease: a broken config throws here and leaves the receipt untouched.
  const sources = loadSources(env);
  const startedReally = Date.now();
  const clock = () => now + (Date.now() - startedReally);

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

  const [, opened, committed] = await env.DB.batch<{ attemptNumber?: number; found?: number }>([
    // An attempt still open here belonged to a consumer whose lease expired: it died, or is too slow to trust.
    // Its outcome is unknown; if it does finish after all, its own update overwrites this one.
    env.DB.prepare(
      `UPDATE attempts SET finished_at = ?2, outcome = 'unknown', error = 'lease expired before the attempt finished',
         duration_ms = ?2 - started_at
       WHERE receipt_id = ?1 AND finished_at IS NULL`,
    ).bind(receipt.receiptId, now),
    env.DB.prepare(
      `INSERT INTO attempts (receipt_id, attempt_number, started_at)
       SELECT ?1, COALESCE(MAX(attempt_number), 0) + 1, ?2 FROM attempts WHERE receipt_id = ?1
       RETURNING attempt_number AS attemptNumber`,
    ).bind(receipt.receiptId, now),
    // A replay (or a redelivery after a lost ack) of an event whose effect already committed: nothing to run, so
    // no forward or external call is even resent.
    env.DB.prepare("SELECT 1 AS found FROM processed_events WHERE source = ? AND event_key = ?").bind(receipt.source, receipt.eventKey),
  ]);
  const attemptNumber = opened!.results[0]!.attemptNumber!;

  const source = sources.get(receipt.source);
  let result: AttemptResult;
  try {
    if (committed!.results.length > 0) result = await alreadyCommitted(env, receipt);
    else if (!source) result = { status: "dead", error: `source ${receipt.source} is no longer configured` };
    else result = await runDestination(env, source.destination, receipt, now);
  } catch (error) {
    result = failureResult(error);
  }
  return finishAttempt(env, receipt, attemptNumber, source, result, now, clock());
}

function failureResult(error: unknown): AttemptResult {
  const message = (error instanceof Error ? error.message : String(error)).slice(0, MAX_ERROR_CHARS);
  if (error instanceof PermanentFailure) return { status: "dead", error: message };
  if (error instanceof OutcomeUnknown) return { status: "unknown", error: message };
  if (error instanceof TransientFailure) {
    return { status: "retry", error: message, httpStatus: error.details.httpStatus, retryAfterSeconds: error.details.retryAfterSeconds };
  }
  return { status: "retry", error: message };
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
  if (row.status === "pending") {
    // Not due yet (or changed under us a moment ago): come back when it is. Waits past the queue's 12 h cap
    // arrive early and land here again, which is how a 24 h backoff is honoured.
    return { kind: "retry", delaySeconds: clampQueueDelay(Math.max(1, ((row.nextAttemptAt ?? now) - now) / 1000)) };
  }
  if (row.status === "processing") {
    return { kind: "retry", delaySeconds: clampQueueDelay(((row.leaseUntil ?? now) - now) / 1000 + 1) };
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
        { db: env.DB, env, now, ...externalCallsFor(receipt.receiptId, now) },
      );
      return commitPlan(env, receipt, plan, now);
    }
    case "forward": {
      if (!body) return { status: "dead", error: "payload no longer retained" };
      const secret = secretValue(env, env.GATEWAY_SIGNING_SECRET_NAME);
      if (secret === null) return { status: "retry", error: `secret ${env.GATEWAY_SIGNING_SECRET_NAME} is not set` };
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
 * A skip writes no processed key, so a skipped event can be replayed once a handler for it exists.
 */
async function commitPlan(env: Env, receipt: LeasedReceipt, plan: HandlerPlan, now: number, httpStatus?: number): Promise<AttemptResult> {
  const status = plan.outcome === "apply" ? "processed" : plan.outcome === "stale" ? "stale" : "skipped";
  const statements = plan.outcome === "apply" ? plan.statements : [];
  const staleAgainst = plan.outcome === "stale" ? plan.againstVersion : null;
  const note = plan.outcome === "stale" ? (plan.note ?? null) : null;
  const guard = env.DB.prepare("INSERT INTO processed_events (source, event_key, receipt_id, processed_at) VALUES (?, ?, ?, ?)").bind(
    receipt.source,
    receipt.eventKey,
    receipt.receiptId,
    now,
  );
  // Not fenced by the lease: once this batch's processed key is in, its outcome is the truth about the event,
  // whoever holds the lease now.
  const markDone = env.DB.prepare(
    `UPDATE receipts SET status = ?, processed_at = ?, lease_until = NULL, next_attempt_at = NULL, last_error = ?,
       stale_against_version = ? WHERE id = ?`,
  ).bind(status, now, note, staleAgainst, receipt.receiptId);
  let results: D1Result[];
  try {
    results = await env.DB.batch(plan.outcome === "skip" ? [markDone] : [guard, ...statements, markDone]);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/UNIQUE constraint failed: processed_events/.test(message)) return alreadyCommitted(env, receipt);
    if (plan.outcome === "apply" && plan.versionClaim && message.includes(VERSION_CLAIM_LOST)) {
      // Another event for the same object committed a version at least as new between the handler's read and
      // this batch; the batch rolled back, so nothing applied. Record that, against the version that won.
      const winner = (await storedVersion(env.DB, receipt.source, plan.versionClaim)) ?? plan.versionClaim.version;
      return commitPlan(env, receipt, { outcome: "stale", againstVersion: winner }, now);
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
  if (plan.outcome === "stale") return { status: "stale", againstVersion: plan.againstVersion, note: plan.note };
  if (plan.outcome === "skip") return { status: "skipped", note: plan.reason };
  return { status: "processed", httpStatus };
}

/**
 * The processed key exists: an earlier run committed this event (the receipt is a replay, or its lease was taken
 * over). Restore the status that run decided — stale runs leave stale_against_version behind — without applying.
 */
async function alreadyCommitted(env: Env, receipt: LeasedReceipt): Promise<AttemptResult> {
  const row = await env.DB.prepare(
    `UPDATE receipts SET status = CASE WHEN stale_against_version IS NULL THEN 'processed' ELSE 'stale' END,
       lease_until = NULL, next_attempt_at = NULL
     WHERE id = ? AND status = 'processing' AND attempts = ?
     RETURNING status`,
  )
    .bind(receipt.receiptId, receipt.attempts)
    .first<{ status: string }>();
  return { status: "duplicate", receiptStatus: row?.status ?? "processed" };
}

async function finishAttempt(
  env: Env,
  receipt: LeasedReceipt,
  attemptNumber: number,
  source: SourceConfig | undefined,
  result: AttemptResult,
  startedAt: number,
  finishedAt: number,
): Promise<ProcessOutcome> {
  let outcome: ProcessOutcome;
  let recorded: string = result.status;
  let detail: string | null = null;
  let receiptUpdate: D1PreparedStatement | null = null;
  const httpStatus = "httpStatus" in result ? (result.httpStatus ?? null) : null;

  switch (result.status) {
    case "retry":
    case "unknown": {
      const policy = source?.retry;
      detail = result.error;
      if (!policy || receipt.attempts > policy.maxRetries) {
        recorded = result.status === "unknown" ? "unknown" : "dead";
        const lastError = `gave up after ${receipt.attempts} attempts: ${result.error}`;
        detail = result.status === "unknown" ? result.error : lastError;
        receiptUpdate = deadStatement(env, receipt, lastError);
        outcome = { kind: "done", status: "dead" };
        break;
      }
      const retryAfter = result.status === "retry" ? (result.retryAfterSeconds ?? null) : null;
      const delaySeconds = nextRetryDelaySeconds(policy, receipt.attempts, retryAfter);
      receiptUpdate = env.DB.prepare(
        `UPDATE receipts SET status = 'pending', lease_until = NULL, next_attempt_at = ?, last_error = ?
         WHERE id = ? AND status = 'processing' AND attempts = ?`,
      ).bind(finishedAt + delaySeconds * 1000, result.error, receipt.receiptId, receipt.attempts);
      outcome = { kind: "retry", delaySeconds: clampQueueDelay(delaySeconds) };
      break;
    }
    case "dead":
      detail = result.error;
      receiptUpdate = deadStatement(env, receipt, result.error);
      outcome = { kind: "done", status: "dead" };
      break;
    case "stale":
      detail = [`stale against version ${result.againstVersion}`, result.note].filter(Boolean).join(": ");
      outcome = { kind: "done", status: "stale" };
      break;
    case "duplicate":
      detail = "already committed by an earlier run; nothing applied";
      outcome = { kind: "done", status: result.receiptStatus };
      break;
    default:
      // Processed and skipped are not errors; a skip's reason is in the handler's plan and the log line.
      outcome = { kind: "done", status: result.status };
  }

  const attemptUpdate = env.DB.prepare(
    "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, error = ?, duration_ms = ? WHERE receipt_id = ? AND attempt_number = ?",
  ).bind(finishedAt, recorded, httpStatus, detail, finishedAt - startedAt, receipt.receiptId, attemptNumber);
  await env.DB.batch(receiptUpdate ? [receiptUpdate, attemptUpdate] : [attemptUpdate]);

  logEvent("attempt", {
    source: receipt.source,
    eventKey: receipt.eventKey,
    eventType: receipt.eventType,
    receipt: receipt.receiptId,
    attempt: attemptNumber,
    outcome: recorded,
    httpStatus,
    error: detail,
    note: result.status === "skipped" ? result.note : undefined,
    durationMs: finishedAt - startedAt,
  });
  return outcome;
}

function deadStatement(env: Env, receipt: LeasedReceipt, error: string): D1PreparedStatement {
  return env.DB.prepare(
    `UPDATE receipts SET status = 'dead', lease_until = NULL, next_attempt_at = NULL, last_error = ?
     WHERE id = ? AND status = 'processing' AND attempts = ?`,
  ).bind(error, receipt.receiptId, receipt.attempts);
}

/**
 * The dead-letter queue's verdict: the queue gave up on this receipt's message. Work still waiting or leased
 * in D1 is marked dead (payload kept, replayable); a receipt that already finished keeps its status.
 */
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
