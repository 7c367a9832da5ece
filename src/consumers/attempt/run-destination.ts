import { handlerFor } from "../../handlers/registry";
import { type HandlerPlan, OutcomeUnknown, PermanentFailure, TransientFailure } from "../../handlers/types";
import { meteredD1 } from "../../lib/meter";
import { secretValue } from "../../lib/secrets";
import { parseJsonBody } from "../../providers/json";
import { applyRoute } from "../../routing/route";
import { MAX_DESTINATION_TIMEOUT_MS, type SourceRoute } from "../../sources/config";
import type { AttemptResult } from "../decide/decide";
import { type LazyLease, LEASE_RACE_RETRY_SECONDS, LeasedElsewhere } from "../lease/lease";
import type { ReceiptForWork } from "../load/load";
import { externalCallsFor } from "./external-calls";
import { forward } from "./forward";
import { deliverToListener } from "./listen-attempt";

/** What one attempt produced: its result, and for an applied handler plan the statements to commit with it. */
export interface AttemptRun {
  result: AttemptResult;
  plan: Extract<HandlerPlan, { outcome: "apply" }> | null;
}

const MAX_ERROR_CHARS = 500;

/** Runs one route of the receipt: its rules, then its destination. Never throws: every failure becomes a result the decision can read. */
export async function runDestination(
  env: Env,
  route: SourceRoute,
  receipt: ReceiptForWork,
  now: number,
  lease: LazyLease,
  oneOfMany = false,
  externalBudgetMs = MAX_DESTINATION_TIMEOUT_MS,
): Promise<AttemptRun> {
  try {
    return await run(
      env,
      route,
      receipt,
      now,
      lease,
      oneOfMany ? `${receipt.receiptId}:${route.rules.name}` : receipt.receiptId,
      externalBudgetMs,
    );
  } catch (error) {
    return { result: failureResult(error), plan: null };
  }
}

/**
 * `deliveryId` names this delivery to a forward's backend (forward.ts); `externalBudgetMs` is what a handler's
 * external calls may spend in all (slice-budget.ts, externalCallBudgetMs).
 */
async function run(
  env: Env,
  route: SourceRoute,
  receipt: ReceiptForWork,
  now: number,
  lease: LazyLease,
  deliveryId: string,
  externalBudgetMs: number,
): Promise<AttemptRun> {
  const { destination } = route;
  if (destination.kind === "none")
    return { result: { status: "skipped", reason: "source has no destination" }, plan: null };
  if (!receipt.body)
    return { result: { status: "dead", error: receipt.bodyProblem ?? "payload no longer retained" }, plan: null };
  // The route's filter, schema and transform (src/routing/route.ts); a plain route passes the stored bytes as they are.
  const routed = await applyRoute(route.rules, {
    body: receipt.body,
    keptHeaders: receipt.keptHeaders,
    eventType: receipt.eventType,
    subjectId: receipt.subjectId,
  });
  if (routed.kind === "skip") return { result: { status: "skipped", reason: routed.reason }, plan: null };
  if (routed.kind === "refuse") return { result: { status: "dead", error: routed.error }, plan: null };
  if (destination.kind === "forward" || destination.kind === "listen") {
    const signingSecret = secretValue(env, env.GATEWAY_SIGNING_SECRET_NAME);
    if (signingSecret === null)
      return { result: { status: "retry", error: `secret ${env.GATEWAY_SIGNING_SECRET_NAME} is not set` }, plan: null };
    const headers = receipt.keptHeaders ? (JSON.parse(receipt.keptHeaders) as Record<string, string>) : {};
    const request = {
      deliveryId,
      source: receipt.source,
      eventKey: receipt.eventKey,
      eventType: receipt.eventType,
      body: routed.transformed?.body ?? receipt.body,
      contentType: routed.transformed ? "application/json" : (headers["content-type"] ?? "application/json"),
      routeHeaders: routed.headers,
    };
    const forwarded =
      destination.kind === "listen"
        ? await deliverToListener(env, destination, request, signingSecret, now)
        : await forward({ ...request, url: destination.url, timeoutMs: destination.timeoutMs }, signingSecret, now);
    switch (forwarded.kind) {
      case "delivered":
        return {
          result: { status: "processed", httpStatus: forwarded.httpStatus },
          plan: { outcome: "apply", statements: [] },
        };
      case "transient":
        return {
          result: {
            status: "retry",
            error: forwarded.error,
            httpStatus: forwarded.httpStatus,
            retryAfterSeconds: forwarded.retryAfterSeconds,
          },
          plan: null,
        };
      case "unknown":
        return { result: { status: "unknown", error: forwarded.error }, plan: null };
      case "permanent":
        return { result: { status: "dead", error: forwarded.error, httpStatus: forwarded.httpStatus }, plan: null };
    }
  }
  const handler = handlerFor(destination.handlerName);
  if (!handler) return { result: { status: "dead", error: `no handler named ${destination.handlerName}` }, plan: null };
  const external = externalCallsFor(receipt.receiptId, now, externalBudgetMs);
  const plan = await handler(
    {
      receiptId: receipt.receiptId,
      source: receipt.source,
      eventKey: receipt.eventKey,
      eventType: receipt.eventType,
      subjectId: receipt.subjectId,
      version: receipt.version,
      occurredAt: receipt.occurredAt,
      payload: routed.transformed ? routed.transformed.value : parseJsonBody(receipt.body),
    },
    {
      db: meteredD1(env.DB),
      env,
      now,
      idempotencyKey: external.idempotencyKey,
      async callExternal(purpose, call) {
        // Only one consumer of a receipt may reach outside D1 at a time: the first external call takes the lease.
        if (!(await lease.acquire())) throw new LeasedElsewhere("another consumer holds this receipt's lease");
        return external.callExternal(purpose, call);
      },
    },
  );
  switch (plan.outcome) {
    case "apply":
      return { result: { status: "processed" }, plan };
    case "stale":
      return { result: { status: "stale", againstVersion: plan.againstVersion, note: plan.note }, plan: null };
    case "skip":
      return { result: { status: "skipped", reason: plan.reason }, plan: null };
  }
}

export function failureResult(error: unknown): AttemptResult {
  const message = (error instanceof Error ? error.message : String(error)).slice(0, MAX_ERROR_CHARS);
  if (error instanceof LeasedElsewhere)
    return { status: "leased-elsewhere", retryAfterSeconds: LEASE_RACE_RETRY_SECONDS };
  if (error instanceof PermanentFailure) return { status: "dead", error: message };
  if (error instanceof OutcomeUnknown) return { status: "unknown", error: message };
  if (error instanceof TransientFailure) {
    return {
      status: "retry",
      error: message,
      httpStatus: error.details.httpStatus,
      retryAfterSeconds: error.details.retryAfterSeconds,
    };
  }
  return { status: "retry", error: message };
}
