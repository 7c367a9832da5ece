import { logError } from "../lib/log";
import { systemMonitor } from "./report";

/**
 * Signature outcomes per source, counted in this isolate's memory and handed to the system monitor in one request
 * at most once per FLUSH_INTERVAL_MS (./signature-spike.ts decides the issue there). Rejection stays cheap
 * (invariant 10): a refused delivery costs a map increment, never a row and never a Durable Object request of its
 * own, so a flood of forgeries costs one monitor request per isolate per interval whatever its size.
 *
 * Verified deliveries are counted too (the share needs them) but sent only for sources the monitor is watching —
 * one with refusals in this tally, or one the monitor named in its last answer (refusals in its window, or an
 * open issue). A source that is never refused sends nothing: the happy path's Durable Object requests per event
 * are unchanged.
 */

/** At most one flush per isolate per this interval, from the ingest path. */
export const FLUSH_INTERVAL_MS = 30_000;
/** Distinct refusal reasons kept per source and flush (reasons are a fixed set; this only bounds the map). */
const MAX_REASONS = 16;

export interface SignatureCounts {
  source: string;
  rejected: number;
  verified: number;
  reasons: Record<string, number>;
}

interface Counts {
  rejected: number;
  verified: number;
  reasons: Map<string, number>;
  /** When the first delivery in these counts was seen: verified counts older than a window are dropped. */
  since: number;
}

const tallies = new Map<string, Counts>();
/** Sources the monitor asked for verified counts of, from its last answer to this isolate. */
let watched = new Set<string>();
let lastFlushAt = Number.NEGATIVE_INFINITY;
let reportsSent = 0;

export type SignatureOutcome = { kind: "rejected"; reason: string } | { kind: "verified" };

export function tallySignature(source: string, outcome: SignatureOutcome, now: number): void {
  let counts = tallies.get(source);
  // A healthy source's verified counts from long ago would only dilute a spike: they start again.
  if (counts !== undefined && counts.rejected === 0 && now - counts.since > FLUSH_INTERVAL_MS * 10) counts = undefined;
  if (counts === undefined) {
    counts = { rejected: 0, verified: 0, reasons: new Map(), since: now };
    tallies.set(source, counts);
  }
  if (outcome.kind === "verified") {
    counts.verified++;
    return;
  }
  counts.rejected++;
  if (counts.reasons.has(outcome.reason) || counts.reasons.size < MAX_REASONS)
    counts.reasons.set(outcome.reason, (counts.reasons.get(outcome.reason) ?? 0) + 1);
}

/**
 * What is due to the monitor: the counts of every source with refusals or watched, once the interval has passed
 * since the last flush (or at once with `force`, the cron's). Null when nothing is due; taking them empties them.
 */
export function takeSignatureReport(now: number, force = false): SignatureCounts[] | null {
  if (!force && now - lastFlushAt < FLUSH_INTERVAL_MS) return null;
  const due: SignatureCounts[] = [];
  for (const [source, counts] of tallies) {
    if (counts.rejected === 0 && !watched.has(source)) continue;
    due.push({
      source,
      rejected: counts.rejected,
      verified: counts.verified,
      reasons: Object.fromEntries(counts.reasons),
    });
    tallies.delete(source);
  }
  if (due.length === 0 && !(force && watched.size > 0)) return null;
  lastFlushAt = now;
  return due;
}

/**
 * Sends what is due (see takeSignatureReport) and keeps the monitor's answer: the sources to send verified counts
 * for from now on. A failed flush loses its counts (they are a tally, not a record) and is logged.
 */
export async function flushSignatureTally(env: Pick<Env, "MONITOR">, now: number, force = false): Promise<boolean> {
  const report = takeSignatureReport(now, force);
  if (report === null) return false;
  reportsSent++;
  try {
    watched = new Set(await systemMonitor(env).reportSignatures(report, now));
  } catch (error) {
    logError("signature_tally.flush_failed", error, { sources: report.length });
  }
  return true;
}

/** Monitor requests this isolate has made for signature counts: the tests' handle on "one per interval". */
export function signatureReportsSent(): number {
  return reportsSent;
}
