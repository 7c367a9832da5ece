/**
 * Optional metrics export to Workers Analytics Engine, written to the `METRICS` dataset binding when it is configured
 * and skipped when it is not: one data point per delivery refused at the door (rejected, too large, unreadable), one
 * per 25 deliveries answered 200 of a source and disposition in this isolate, or fewer at the first delivery a
 * minute after the tally opened (./delivery-tally.ts), and one per processing attempt that did not simply succeed (src/consumers/receipts/process.ts skips
 * a processed one). A point's double2 is the number of deliveries it counts, so counts are SUM(_sample_interval *
 * double2); deliveries still in a tally when the isolate is evicted are never written (at most 24 per source and
 * disposition, answered 200 and counted in D1 and the shards all the same). `writeDataPoint` queues the point and
 * returns at once, so nothing here is awaited and the acknowledgement path never waits on it; a failure to write is
 * swallowed (metrics must never fail a delivery).
 *
 * Like the log lines, a data point carries named fields only: never a secret, a signature, a header or a body.
 * The layout, and SQL API queries over it: docs/metrics.md.
 *
 *   delivery  blobs [ "delivery", source, disposition, signature result, verifying secret ]
 *             doubles [ ack latency ms, count, max ms ]
 *   (the verifying secret is the name of the secret that verified an answered delivery, never its value; "" for a
 *   refusal, or an adapter that names none: the verification health, docs/operating.md)
 *   attempt   blobs [ "attempt", source, outcome, HTTP status or "" ]       doubles [ duration ms, attempt number ]
 *   index1 is the source in both, so queries for one source read only its rows.
 */

import { type DeliveryTally, tallyDelivery } from "./delivery-tally";
import { countLocalOutcome } from "./local-rejections";
import { count } from "./meter";

/** Any Worker env: the binding is optional, so it is read by name rather than required by the type. */
export type MetricsEnv = object;

export interface DeliveryMetric {
  source: string;
  /** accepted, duplicate, quarantined, rejected, too_large, body_unreadable, claim_failed, … */
  disposition: string;
  /** "valid", the reason a signature was refused (e.g. "signature-mismatch"), or "unchecked". */
  signature: string;
  /** The name of the secret that verified it (VerifyResult's verifiedBy), for deliveries answered 200. */
  verifiedBy?: string;
  /** From the request's arrival to the answer, in ms. */
  ackMs: number;
}

export interface AttemptMetric {
  source: string;
  /** processed, stale, skipped, retry, dead, unknown, duplicate */
  outcome: string;
  httpStatus: number | null;
  durationMs: number;
  attempt: number;
}

function datasetOf(env: MetricsEnv): AnalyticsEngineDataset | undefined {
  return (env as { METRICS?: AnalyticsEngineDataset }).METRICS;
}

function write(env: MetricsEnv, point: AnalyticsEngineDataPoint): void {
  const dataset = datasetOf(env);
  if (!dataset) return;
  try {
    dataset.writeDataPoint(point);
    count("analyticsPoints");
  } catch {
    // Never let metrics fail the work they describe.
  }
}

/**
 * @example
 *   recordDelivery(c.env, { source: "stripe", disposition: "accepted", signature: "valid", ackMs: 12 });
 */
export function recordDelivery(env: MetricsEnv, fields: DeliveryMetric, now = Date.now()): void {
  // Analytics Engine keeps nothing under wrangler dev: the dev server counts rejections and verifications itself.
  if (fields.disposition === "rejected")
    countLocalOutcome(env, fields.source, { kind: "rejected", reason: fields.signature }, now);
  else if (ANSWERED_200.has(fields.disposition))
    countLocalOutcome(env, fields.source, { kind: "verified", secret: fields.verifiedBy ?? "" }, now);
  const blobs = ["delivery", fields.source, fields.disposition, fields.signature, fields.verifiedBy ?? ""];
  if (!ANSWERED_200.has(fields.disposition)) {
    // A refusal keeps a point of its own: its count is what the stats report, and it is never on the happy path.
    write(env, { indexes: [fields.source], blobs, doubles: [fields.ackMs, 1, fields.ackMs] });
    return;
  }
  if (!datasetOf(env)) return;
  const key = blobs.join("\u0000");
  const { tally, point } = tallyDelivery(tallies.get(key), fields.ackMs, now);
  if (tally) tallies.set(key, tally);
  else tallies.delete(key);
  if (point) write(env, { indexes: [fields.source], blobs, doubles: [point.sampleMs, point.count, point.maxMs] });
}

/** Dispositions answered 200, whose deliveries share points (./delivery-tally.ts). */
const ANSWERED_200 = new Set(["accepted", "duplicate", "quarantined"]);

/** This isolate's open tallies, by source, disposition and signature result. */
const tallies = new Map<string, DeliveryTally>();

/**
 * @example
 *   recordAttempt(env, { source: "stripe", outcome: "retry", httpStatus: 503, durationMs: 840, attempt: 2 });
 */
export function recordAttempt(env: MetricsEnv, fields: AttemptMetric): void {
  write(env, {
    indexes: [fields.source],
    blobs: ["attempt", fields.source, fields.outcome, fields.httpStatus === null ? "" : String(fields.httpStatus)],
    doubles: [fields.durationMs, fields.attempt],
  });
}
