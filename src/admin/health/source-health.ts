import { plural } from "../../lib/plural";

/**
 * A source's health, and the reasons for it. "failing" always comes with at least one reason an operator can
 * act on: dead letters to replay or dismiss, an open alert, a broken config table. Dead letters and the backlog count
 * every delivery: a receipt's own, and each further route's (../stats/further-delivery-numbers.ts).
 */

export type Health = "ok" | "backlog" | "failing";

export type HealthReason =
  | { reason: "dead-letters"; count: number; message: string }
  | { reason: "open-alerts"; count: number; message: string }
  | { reason: "config-invalid"; count: number; message: string }
  | { reason: "backlog"; ageMs: number; message: string };

/** A backlog this old makes a source unhealthy even with nothing dead. */
export const BACKLOG_AGE_MS = 15 * 60_000;

/**
 * @example
 *   explainHealth({ deadTotal: 2, openAlerts: 0, oldestPendingAgeMs: null, configProblems: 0 });
 *   // { health: "failing", reasons: [{ reason: "dead-letters", count: 2, message: "2 dead letters waiting…" }] }
 */
export function explainHealth(facts: {
  deadTotal: number;
  openAlerts: number;
  oldestPendingAgeMs: number | null;
  configProblems: number;
}): {
  health: Health;
  reasons: HealthReason[];
} {
  const reasons: HealthReason[] = [];
  if (facts.configProblems > 0) {
    reasons.push({
      reason: "config-invalid",
      count: facts.configProblems,
      message: `The source's configuration has ${plural(facts.configProblems, "problem")}: its deliveries answer 503 until it is fixed.`,
    });
  }
  if (facts.deadTotal > 0) {
    reasons.push({
      reason: "dead-letters",
      count: facts.deadTotal,
      message: `${plural(facts.deadTotal, "dead letter")} waiting for an operator: replay, or dismiss once the cause is fixed.`,
    });
  }
  if (facts.openAlerts > 0) {
    reasons.push({
      reason: "open-alerts",
      count: facts.openAlerts,
      message: `${plural(facts.openAlerts, "open alert")}.`,
    });
  }
  const failing = reasons.length > 0;
  if (facts.oldestPendingAgeMs !== null && facts.oldestPendingAgeMs > BACKLOG_AGE_MS) {
    const minutes = Math.round(facts.oldestPendingAgeMs / 60_000);
    reasons.push({
      reason: "backlog",
      ageMs: facts.oldestPendingAgeMs,
      message: `The oldest unfinished delivery has waited ${minutes} min.`,
    });
  }
  return { health: failing ? "failing" : reasons.length > 0 ? "backlog" : "ok", reasons };
}
