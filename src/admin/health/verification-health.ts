import type { SecretUse } from "../../claims/secret-use";
import type { OutcomeCount } from "../../lib/local-rejections";

/**
 * The verification health of one source, decided here from what was counted (docs/operating.md, "Verification
 * health"): which secret verified its deliveries, when each last did, whether an older one can go, and why
 * deliveries were refused, hour by hour. Pure: ./verification-report.ts gathers the inputs.
 */

/**
 * How long an older secret must have verified nothing before it is called safe to remove: senders retry a failed
 * delivery for up to three days (Stripe's schedule is the longest common one), so a retry signed with the older
 * secret can still arrive that long after the sender switched.
 */
export const SAFE_TO_REMOVE_AFTER_MS = 3 * 24 * 3_600_000;

/** A secret a delivery may be verified with, in the order the route tries them (the first is the current one). */
export interface SecretCandidate {
  name: string;
  kind: "listed" | "kept";
  /** A listed secret's `expires`, else null. */
  expiresAt: number | null;
}

export type SecretAdvice =
  /** The source has this secret alone: nothing to tell apart. */
  | "only-secret"
  /** The current secret (listed first, or the newest kept one). */
  | "current"
  /** An older secret that verified deliveries within SAFE_TO_REMOVE_AFTER_MS: the rotation is not done. */
  | "still-verifying"
  /** An older secret that has verified nothing for SAFE_TO_REMOVE_AFTER_MS while the source was watched. */
  | "safe-to-remove"
  /** An older secret not seen verifying anything, watched for less than SAFE_TO_REMOVE_AFTER_MS. */
  | "not-seen-yet";

export interface SecretHealth extends SecretCandidate {
  /** Deliveries it verified in the window; null when counts are not stored. */
  deliveries: number | null;
  /** Its share of the window's verified deliveries, 0..1; null when counts are not stored or there were none. */
  share: number | null;
  /** The newest hour's first delivery it verified (to the hour: src/claims/secret-use.ts); null if never seen. */
  lastVerifiedAt: number | null;
  advice: SecretAdvice;
  /** A sentence for the operator, naming the secret (never its value); null when there is nothing to say. */
  message: string | null;
}

export interface HourOfOutcomes {
  hour: number;
  verified: number;
  rejected: Record<string, number>;
}

export interface VerificationHealth {
  secrets: SecretHealth[];
  /** Verified deliveries in the window whose adapter named no secret (Plaid), or a secret no longer listed. */
  unattributed: number | null;
  verified: number | null;
  rejected: number | null;
  /** rejected / (verified + rejected) over the window; null when nothing was counted. */
  rejectionRate: number | null;
  rejectionsByReason: Record<string, number>;
  hourly: HourOfOutcomes[];
  /** The messages of every secret that has one, for `cli check` and the dashboard's notice. */
  warnings: string[];
}

/** How long ago, in words as precise as the hourly stamp is: under an hour is "within the last hour". */
export function formatAgo(at: number, now: number): string {
  const hours = Math.floor((now - at) / 3_600_000);
  if (hours < 1) return "within the last hour";
  if (hours < 48) return `${hours} ${hours === 1 ? "hour" : "hours"} ago`;
  return `${Math.floor(hours / 24)} days ago`;
}

export function percent(share: number): string {
  if (share > 0 && share < 0.01) return "<1 %";
  return `${Math.round(share * 100)} %`;
}

function hourlyOf(counts: readonly OutcomeCount[]): HourOfOutcomes[] {
  const byHour = new Map<number, HourOfOutcomes>();
  for (const { hour, outcome, deliveries } of counts) {
    const entry = byHour.get(hour) ?? { hour, verified: 0, rejected: {} };
    byHour.set(hour, entry);
    if (outcome.kind === "verified") entry.verified += deliveries;
    else entry.rejected[outcome.reason] = (entry.rejected[outcome.reason] ?? 0) + deliveries;
  }
  return [...byHour.values()].sort((a, b) => a.hour - b.hour);
}

interface SecretFacts {
  candidate: SecretCandidate;
  current: boolean;
  deliveries: number | null;
  share: number | null;
  use: SecretUse | undefined;
}

/** Since when the source has been watched: the earliest any of its secrets was first seen verifying. */
function watchedSince(uses: readonly SecretUse[]): number | null {
  return uses.length === 0 ? null : Math.min(...uses.map((use) => use.firstVerifiedAt));
}

function adviceFor(facts: SecretFacts, alone: boolean, watched: number | null, now: number) {
  const { candidate, current, deliveries, share, use } = facts;
  const name = `\`${candidate.name}\``;
  if (alone) return { advice: "only-secret" as const, message: null };
  if (current) {
    const silent = use === undefined && (deliveries ?? 0) === 0 && watched !== null;
    return {
      advice: "current" as const,
      message: silent
        ? `${name} (the current secret) has verified nothing yet: the sender still signs with an older one`
        : null,
    };
  }
  const lastUsed = use?.lastVerifiedAt ?? null;
  if (lastUsed !== null && now - lastUsed < SAFE_TO_REMOVE_AFTER_MS) {
    const sharePart = share !== null && (deliveries ?? 0) > 0 ? `still verifies ${percent(share)} of deliveries; ` : "";
    return { advice: "still-verifying" as const, message: `${name} ${sharePart}last used ${formatAgo(lastUsed, now)}` };
  }
  if (lastUsed !== null)
    return {
      advice: "safe-to-remove" as const,
      message: `${name} last used ${formatAgo(lastUsed, now)}; safe to remove`,
    };
  if (watched !== null && now - watched >= SAFE_TO_REMOVE_AFTER_MS)
    return {
      advice: "safe-to-remove" as const,
      message: `${name} has verified nothing since the source was first watched ${formatAgo(watched, now)}; safe to remove`,
    };
  return { advice: "not-seen-yet" as const, message: null };
}

/**
 * The health of a source whose secrets are `candidates` (in the route's order), given the durable last uses its
 * shards stamped and the window's counts (null when not stored).
 */
export function verificationHealth(
  candidates: readonly SecretCandidate[],
  uses: readonly SecretUse[],
  counts: readonly OutcomeCount[] | null,
  now: number,
): VerificationHealth {
  const hourly = counts ? hourlyOf(counts) : [];
  const verifiedBy = new Map<string, number>();
  for (const { outcome, deliveries } of counts ?? [])
    if (outcome.kind === "verified") verifiedBy.set(outcome.secret, (verifiedBy.get(outcome.secret) ?? 0) + deliveries);
  const verified = counts ? hourly.reduce((sum, hour) => sum + hour.verified, 0) : null;
  const rejectionsByReason: Record<string, number> = {};
  for (const hour of hourly)
    for (const [reason, n] of Object.entries(hour.rejected))
      rejectionsByReason[reason] = (rejectionsByReason[reason] ?? 0) + n;
  const rejected = counts ? Object.values(rejectionsByReason).reduce((sum, n) => sum + n, 0) : null;
  const watched = watchedSince(uses);
  const secrets = candidates.map((candidate, index): SecretHealth => {
    const deliveries = counts ? (verifiedBy.get(candidate.name) ?? 0) : null;
    const share = deliveries !== null && verified ? deliveries / verified : null;
    const use = uses.find((seen) => seen.secretName === candidate.name);
    const facts = { candidate, current: index === 0, deliveries, share, use };
    const { advice, message } = adviceFor(facts, candidates.length === 1, watched, now);
    return { ...candidate, deliveries, share, lastVerifiedAt: use?.lastVerifiedAt ?? null, advice, message };
  });
  const attributed = secrets.reduce((sum, secret) => sum + (secret.deliveries ?? 0), 0);
  const total = verified !== null && rejected !== null ? verified + rejected : null;
  return {
    secrets,
    unattributed: verified !== null ? verified - attributed : null,
    verified,
    rejected,
    rejectionRate: total ? rejected! / total : null,
    rejectionsByReason,
    hourly,
    warnings: secrets.flatMap((secret) => (secret.message ? [secret.message] : [])),
  };
}
