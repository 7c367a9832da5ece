import { isLocalDevelopment } from "./local-development";

/**
 * Deliveries counted under `wrangler dev`, where Analytics Engine keeps nothing to read back: a tally per source,
 * hour and outcome (a rejection's reason, or the secret that verified an answered delivery) in the dev server's
 * memory (one isolate serves every request locally), since the server started or last reloaded. Only with
 * LOCAL_DEVELOPMENT (from .dev.vars, which is never deployed), so a deployed Worker neither keeps it nor reports
 * it; and never a D1 row, so a flood of forgeries costs no writes.
 */

const HOUR_MS = 3_600_000;
/** Hours kept: the charts' day, and a little more. */
const KEPT_HOURS = 48;

/** What a delivery came to, as the verification health counts it. */
export type VerificationOutcome =
  | { kind: "rejected"; reason: string }
  /** `secret` is the name that verified it; "" when the adapter names none (./analytics.ts). */
  | { kind: "verified"; secret: string };

/** Per source, per hour, per outcome key (`rejected:<reason>` or `verified:<secret>`). */
const tally = new Map<string, Map<number, Map<string, number>>>();

function outcomeKey(outcome: VerificationOutcome): string {
  return outcome.kind === "rejected" ? `rejected:${outcome.reason}` : `verified:${outcome.secret}`;
}

function outcomeOf(key: string): VerificationOutcome {
  const colon = key.indexOf(":");
  const kind = key.slice(0, colon);
  const rest = key.slice(colon + 1);
  return kind === "rejected" ? { kind, reason: rest } : { kind: "verified", secret: rest };
}

export function countLocalOutcome(env: object, source: string, outcome: VerificationOutcome, now = Date.now()): void {
  if (!isLocalDevelopment(env)) return;
  const hour = Math.floor(now / HOUR_MS) * HOUR_MS;
  const byHour = tally.get(source) ?? new Map<number, Map<string, number>>();
  tally.set(source, byHour);
  const byOutcome = byHour.get(hour) ?? new Map<string, number>();
  byHour.set(hour, byOutcome);
  const key = outcomeKey(outcome);
  byOutcome.set(key, (byOutcome.get(key) ?? 0) + 1);
  for (const kept of byHour.keys()) if (kept < hour - KEPT_HOURS * HOUR_MS) byHour.delete(kept);
}

/** One hour's count of one outcome. */
export interface OutcomeCount {
  hour: number;
  outcome: VerificationOutcome;
  deliveries: number;
}

/** One source's outcomes per hour since `since`; null when this is not a local dev server. */
export function localOutcomes(env: object, since: number, source: string): OutcomeCount[] | null {
  if (!isLocalDevelopment(env)) return null;
  const fromHour = Math.floor(since / HOUR_MS) * HOUR_MS;
  const counts: OutcomeCount[] = [];
  for (const [hour, byOutcome] of tally.get(source) ?? []) {
    if (hour < fromHour) continue;
    for (const [key, deliveries] of byOutcome) counts.push({ hour, outcome: outcomeOf(key), deliveries });
  }
  return counts;
}

/** Each source's rejections per hour since `since`; null when this is not a local dev server. */
export function localRejections(env: object, since: number, source?: string): Map<string, Map<number, number>> | null {
  if (!isLocalDevelopment(env)) return null;
  const result = new Map<string, Map<number, number>>();
  for (const [name, kept] of tally) {
    if (source !== undefined && name !== source) continue;
    // As before outcomes were told apart: a source is listed once it has had a rejection at all.
    if (![...kept.values()].some((byOutcome) => [...byOutcome.keys()].some((key) => key.startsWith("rejected:"))))
      continue;
    const byHour = new Map<number, number>();
    for (const { hour, outcome, deliveries } of localOutcomes(env, since, name) ?? [])
      if (outcome.kind === "rejected") byHour.set(hour, (byHour.get(hour) ?? 0) + deliveries);
    result.set(name, byHour);
  }
  return result;
}
