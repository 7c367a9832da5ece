import { env } from "cloudflare:workers";
import { inject } from "vitest";
import { receiptDetail } from "../../../src/admin/receipts/receipt-detail";
import { database } from "../../../src/db/client";
import { ulid } from "../../../src/lib/ulid";

/**
 * Helpers for the processing tests. Receipts are seeded straight into the real D1 table (as the relay would
 * leave them) but not enqueued, so a test drives processReceipt itself — with an injected clock — and the
 * real queue consumer never races it. End-to-end tests go through the route instead.
 */

declare module "vitest" {
  export interface ProvidedContext {
    forwardStandinOrigin: string;
  }
}

export function standinOrigin(): string {
  return inject("forwardStandinOrigin");
}

export interface SeedOptions {
  source: string;
  payload: unknown;
  eventKey?: string;
  eventType?: string | null;
  subjectId?: string | null;
  version?: number | null;
  occurredAt?: number | null;
  receivedAt?: number;
  status?: string;
}

let seeded = 0;

export async function seedReceipt(options: SeedOptions): Promise<string> {
  const receivedAt = options.receivedAt ?? Date.now();
  const receiptId = ulid(receivedAt);
  const body = new TextEncoder().encode(JSON.stringify(options.payload));
  await env.DB.prepare(
    `INSERT INTO receipts (id, source, event_key, event_type, subject, version, occurred_at, payload_sha256, body,
       kept_headers, received_at, relayed_at, status, provenance)
     VALUES (?, ?, ?, ?, ?, ?, ?, 'not-checked-here', ?, ?, ?, ?, ?, 'live')`,
  )
    .bind(
      receiptId,
      options.source,
      options.eventKey ?? `evt_${receiptId}_${++seeded}`,
      options.eventType ?? null,
      options.subjectId ?? null,
      options.version ?? null,
      options.occurredAt ?? null,
      body,
      JSON.stringify({ "content-type": "application/json" }),
      receivedAt,
      receivedAt,
      options.status ?? "pending",
    )
    .run();
  return receiptId;
}

export interface ReceiptRow {
  status: string;
  attempts: number;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
  lastError: string | null;
  staleAgainstVersion: number | null;
  provenance: string;
  replayCount: number;
  hasBody: number;
}

export async function receiptRow(receiptId: string): Promise<ReceiptRow> {
  const row = await env.DB.prepare(
    `SELECT status, attempts, next_attempt_at AS nextAttemptAt, lease_until AS leaseUntil, last_error AS lastError,
       stale_against_version AS staleAgainstVersion, provenance, replay_count AS replayCount, body IS NOT NULL AS hasBody
     FROM receipts WHERE id = ?`,
  )
    .bind(receiptId)
    .first<ReceiptRow>();
  if (!row) throw new Error(`no receipt ${receiptId}`);
  return row;
}

export interface AttemptRow {
  attemptNumber: number;
  startedAt: number;
  finishedAt: number | null;
  outcome: string | null;
  httpStatus: number | null;
  error: string | null;
  durationMs: number | null;
}

/** The attempts as the audit trail shows them: rows for unusual attempts, plus a first-try success kept in the receipt. */
export async function attemptRows(receiptId: string): Promise<AttemptRow[]> {
  const detail = await receiptDetail(database(env), receiptId);
  return detail?.attempts ?? [];
}

export interface StandinRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
  answer: number | "hung";
  receivedAt: number;
}

/** What the forward stand-in received under one Idempotency-Key. */
export async function standinRequests(idempotencyKey: string): Promise<StandinRequest[]> {
  const response = await fetch(`${standinOrigin()}/__requests?key=${encodeURIComponent(idempotencyKey)}`);
  return response.json<StandinRequest[]>();
}

/** The real bindings with extra sources: for sources whose handler only the test registers. */
/**
 * A receipt whose own route (`ownRoute`) is done, with a further delivery to `route` waiting in its own row
 * (migrations/0014), as the first attempt's fan-out leaves it.
 */
export async function seedFurtherDelivery(
  options: SeedOptions & { ownRoute: string; route: string; nextAttemptAt?: number | null },
): Promise<string> {
  const receiptId = await seedReceipt({ ...options, status: "processed" });
  await env.DB.prepare("UPDATE receipts SET route = ?, filtered_routes = '' WHERE id = ?")
    .bind(options.ownRoute, receiptId)
    .run();
  await env.DB.prepare(
    "INSERT INTO deliveries (receipt_id, route, status, attempts, next_attempt_at) VALUES (?, ?, 'pending', 0, ?)",
  )
    .bind(receiptId, options.route, options.nextAttemptAt ?? null)
    .run();
  return receiptId;
}

export function envWithSources(sources: Record<string, Record<string, unknown>>): Env {
  return { ...env, SOURCES: { ...(env.SOURCES as Record<string, unknown>), ...sources } } as Env;
}

/** A source table for a test handler. */
export function handlerSource(handlerName: string, retry?: Record<string, number>): Record<string, unknown> {
  return {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: `handler:${handlerName}`,
    ...(retry ? { retry } : {}),
  };
}

export const SECOND = 1000;
