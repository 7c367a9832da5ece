/**
 * Optional metrics export to Workers Analytics Engine: one data point per delivery (rejected ones included) and
 * one per processing attempt that did not simply succeed (src/consumers/process.ts skips a processed one), written to the `METRICS` dataset binding when it is configured and skipped when
 * it is not. `writeDataPoint` queues the point and returns at once, so nothing here is awaited and the
 * acknowledgement path never waits on it; a failure to write is swallowed (metrics must never fail a delivery).
 *
 * Like the log lines, a data point carries named fields only: never a secret, a signature, a header or a body.
 * The layout, and SQL API queries over it: docs/metrics.md.
 *
 *   delivery  blobs [ "delivery", source, disposition, signature result ]   doubles [ ack latency ms, 1 ]
 *   attempt   blobs [ "attempt", source, outcome, HTTP status or "" ]       doubles [ duration ms, attempt number ]
 *   index1 is the source in both, so queries for one source read only its rows.
 */

import { countLocalRejection } from "./local-rejections";
import { count } from "./meter";

/** Any Worker env: the binding is optional, so it is read by name rather than required by the type. */
export type MetricsEnv = object;

export interface DeliveryMetric {
  source: string;
  /** accepted, duplicate, quarantined, rejected, too_large, body_unreadable, claim_failed, … */
  disposition: string;
  /** "valid", the reason a signature was refused (e.g. "signature-mismatch"), or "unchecked". */
  signature: string;
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

function write(env: MetricsEnv, point: AnalyticsEngineDataPoint): void {
  const dataset = (env as { METRICS?: AnalyticsEngineDataset }).METRICS;
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
export function recordDelivery(env: MetricsEnv, fields: DeliveryMetric): void {
  // Analytics Engine keeps nothing under wrangler dev: the dev server counts its rejections itself.
  if (fields.disposition === "rejected") countLocalRejection(env, fields.source);
  write(env, {
    indexes: [fields.source],
    blobs: ["delivery", fields.source, fields.disposition, fields.signature],
    doubles: [fields.ackMs, 1],
  });
}

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
