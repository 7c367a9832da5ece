import { createScheduledController, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { ClaimShard } from "../../src/claims/shard";
import { sha256Hex } from "../../src/crypto/digest";
import { utf8Bytes } from "../../src/crypto/encoding";
import worker from "../../src/index";
import type { ReconcileCounts, StepFailure } from "../../src/reconcile/reconcile";
import { post, signDemo } from "../support/deliveries";

/** The provider-API stand-in this vitest process started (vitest.config.ts points the fixtures at it too). */
export const STAND_IN = (env as unknown as { RECONCILE_STAND_IN: string }).RECONCILE_STAND_IN;
/**
 * A cron run visits up to RECONCILE_SHARD_VISITS claim shards across the ~60 test sources, and Durable Objects
 * start cold in each test file: a run takes seconds on a loaded machine, and shard work may need several runs.
 */
export const CRON_TEST_TIMEOUT_MS = 180_000;

/** Fires the worker's real scheduled handler with the cron's clock set to `now` (and, for one test, altered bindings). */
export async function runCron(now: number, runEnv: Env = env): Promise<void> {
  await worker.scheduled(createScheduledController({ scheduledTime: now, cron: "*/5 * * * *" }), runEnv);
}

/**
 * Claims an event inside the real shard, then deletes the shard's alarm before it can fire: the acknowledged claim
 * is stranded, and only the cron's visit can relay it.
 */
export async function claimWithLostAlarm(
  stub: DurableObjectStub<ClaimShard>,
  source: string,
  eventKey: string,
  receivedAt: number,
): Promise<void> {
  const body = utf8Bytes(JSON.stringify({ type: "thing.happened" }));
  await runInDurableObject(stub, async (shard: ClaimShard, state) => {
    await shard.claim({
      source,
      eventKey,
      eventKeySigned: true,
      payloadSha256: await sha256Hex(body),
      eventType: "thing.happened",
      subjectId: null,
      version: null,
      occurredAt: null,
      body,
      keptHeaders: "{}",
      receivedAt,
      provenance: "live",
    });
    await state.storage.deleteAlarm();
  });
}

export interface RecordedRun {
  runId: string;
  clock: number;
  counts: ReconcileCounts;
  failures: StepFailure[] | null;
}

export async function runsAt(clock: number): Promise<RecordedRun[]> {
  const rows = await env.DB.prepare(
    "SELECT id AS runId, clock, counts, failures FROM reconcile_runs WHERE clock = ? ORDER BY started_at",
  )
    .bind(clock)
    .all<{ runId: string; clock: number; counts: string; failures: string | null }>();
  return rows.results.map((row) => ({
    runId: row.runId,
    clock: row.clock,
    counts: JSON.parse(row.counts) as ReconcileCounts,
    failures: row.failures ? (JSON.parse(row.failures) as StepFailure[]) : null,
  }));
}

/** Runs the cron once and returns what it recorded. */
export async function cronRun(now: number, runEnv: Env = env): Promise<RecordedRun> {
  await runCron(now, runEnv);
  const runs = await runsAt(now);
  const run = runs.at(-1);
  if (!run) throw new Error(`no reconcile_runs row for clock ${now}`);
  return run;
}

/**
 * Runs the cron (same clock, a millisecond apart so each run has its own row) until `done` holds. Shard visits
 * rotate when a run's budget is smaller than the shard count, so shard work may take several runs.
 */
export async function cronUntil(
  now: number,
  done: () => Promise<boolean>,
  maxRuns = 40,
  runEnv: Env = env,
): Promise<RecordedRun[]> {
  const runs: RecordedRun[] = [];
  for (let index = 0; index < maxRuns; index++) {
    runs.push(await cronRun(now + index, runEnv));
    if (await done()) return runs;
  }
  throw new Error(`still not done after ${maxRuns} cron runs`);
}

/**
 * The bindings with SOURCES narrowed to the named sources: a cron run given them visits only those sources' claim
 * shards. With every fixture source configured, a run visits up to RECONCILE_SHARD_VISITS shards (hundreds), each a
 * cold Durable Object in a test file, and a test waiting for one shard's work paid for all of them on every run.
 */
export function withOnlySources(...names: string[]): Env {
  const sources = env.SOURCES as Record<string, unknown>;
  return { ...env, SOURCES: Object.fromEntries(names.map((name) => [name, sources[name]])) } as Env;
}

/**
 * A clock for one test file's cron runs, at a random point days in the past. The stand-in is shared by every
 * test run in the working tree and never reset; catch-up only lists its window [checkpoint − overlap, run clock],
 * so runs on their own random clocks never see (and claim, and forward) each other's events.
 */
export function pastClock(): number {
  return Date.now() - (10 + Math.floor(Math.random() * 1000)) * 86_400_000 - Math.floor(Math.random() * 86_400_000);
}

/** A short token that makes keys unique to this test run: the stand-in is shared and never reset. */
export function unique(): string {
  return crypto.randomUUID().replace(/-/g, "").slice(0, 12);
}

export interface StandInRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export async function standIn(namespace: string, control: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${STAND_IN}/${namespace}/_control/${control}`, {
    method: body === undefined ? "GET" : "POST",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`stand-in ${control} answered ${response.status}`);
  return response.json();
}

export async function standInRequests(namespace: string): Promise<StandInRequest[]> {
  return (await standIn(namespace, "requests")) as StandInRequest[];
}

/** A Stripe event as GET /v1/events and webhook deliveries carry it. */
export function stripeEvent(eventId: string, createdMs: number, objectId: string, type = "invoice.paid") {
  return {
    id: eventId,
    object: "event",
    api_version: "2024-06-20",
    created: Math.floor(createdMs / 1000),
    data: { object: { id: objectId, object: "invoice", amount_paid: 4200, status: "paid" } },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

/** A live Stripe delivery: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body" keyed by the whsec_ text>`. */
export async function deliverStripe(source: string, body: string): Promise<Response> {
  const timestamp = Math.floor(Date.now() / 1000);
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(env.RECONCILE_STRIPE_WEBHOOK_SECRET),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${timestamp}.${body}`)));
  const hex = [...mac].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return post(`/webhooks/${source}`, body, {
    "stripe-signature": `t=${timestamp},v1=${hex}`,
    "content-type": "application/json",
  });
}

/** A live delivery to a Standard Webhooks test source (signed under the demo secret). */
export function deliverLive(source: string, webhookId: string, body: string): Promise<Response> {
  return post(`/webhooks/${source}`, body, signDemo(webhookId, body));
}

export async function receipt(source: string, eventKey: string) {
  return env.DB.prepare(
    `SELECT id AS receiptId, status, provenance, body IS NOT NULL AS hasBody, kept_headers AS keptHeaders, received_at AS receivedAt
     FROM receipts WHERE source = ? AND event_key = ?`,
  )
    .bind(source, eventKey)
    .first<{
      receiptId: string;
      status: string;
      provenance: string;
      hasBody: number;
      keptHeaders: string | null;
      receivedAt: number;
    }>();
}
