import { plural } from "../lib/plural";
import type { IssueCondition } from "./issues/types";

/**
 * When a source's signature failures make an issue (kind `signature-failures`), as a pure function of what the
 * system monitor holds for the window: deliveries refused by their signature check and deliveries verified, per
 * source, counted by each isolate in memory and flushed at most once per interval (./signature-tally.ts), never a
 * row per delivery.
 *
 * An issue opens when the window holds at least `minRejections` refusals AND they are at least `openShare` of the
 * source's deliveries: a few forgeries among thousands of good deliveries are noise, and a quiet source's single
 * forgery is no spike. It stays open while refusals are still `resolveShare` or more of the deliveries (a lower
 * bar than opening, so an issue near the line does not flap), and resolves when they fall below it, or when the
 * window holds none. Critical when `criticalShare` or more are refused: almost nothing of the source gets in, the
 * usual sign of a secret rotated at the sender and never updated here.
 */

export interface SignatureThresholds {
  /** Refusals in the window below this never open an issue. */
  minRejections: number;
  /** Share of the window's deliveries refused that opens an issue (0..1). */
  openShare: number;
  /** An open issue resolves when the refused share falls below this (0..1, at most openShare). */
  resolveShare: number;
  /** Share refused from which the issue is critical (0..1). */
  criticalShare: number;
  /** The window the counts cover, in ms. */
  windowMs: number;
}

export const DEFAULT_SIGNATURE_THRESHOLDS: SignatureThresholds = {
  minRejections: 10,
  openShare: 0.5,
  resolveShare: 0.2,
  criticalShare: 0.9,
  windowMs: 15 * 60_000,
};

/** One source's counts over the window. */
export interface SignatureWindow {
  source: string;
  rejected: number;
  verified: number;
  /** Refusals by reason (e.g. `signature-mismatch`, `timestamp-out-of-tolerance`). */
  reasons: Record<string, number>;
}

/**
 * @example
 *   signatureConditions([{ source: "stripe", rejected: 40, verified: 2, reasons: { "signature-mismatch": 40 } }],
 *     new Set())   // one critical condition for stripe
 */
export function signatureConditions(
  windows: readonly SignatureWindow[],
  openSources: ReadonlySet<string>,
  thresholds: SignatureThresholds = DEFAULT_SIGNATURE_THRESHOLDS,
): IssueCondition[] {
  const conditions: IssueCondition[] = [];
  for (const window of windows) {
    const total = window.rejected + window.verified;
    if (window.rejected === 0 || total === 0) continue;
    const share = window.rejected / total;
    const firing = openSources.has(window.source)
      ? share >= thresholds.resolveShare
      : window.rejected >= thresholds.minRejections && share >= thresholds.openShare;
    if (!firing) continue;
    conditions.push({
      kind: "signature-failures",
      source: window.source,
      route: null,
      store: null,
      severity: share >= thresholds.criticalShare ? "critical" : "warning",
      message: signatureMessage(window, share, thresholds.windowMs),
    });
  }
  return conditions;
}

function signatureMessage(window: SignatureWindow, share: number, windowMs: number): string {
  const reasons = Object.entries(window.reasons)
    .sort(([, a], [, b]) => b - a)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(", ");
  const minutes = Math.round(windowMs / 60_000);
  return (
    `${plural(window.rejected, "delivery", "deliveries")} of ${window.rejected + window.verified} (${Math.round(share * 100)} %) ` +
    `failed the signature check in the last ${minutes} minutes (${reasons}): if the sender rotated its secret, ` +
    "add the new one to the source's secrets."
  );
}

/**
 * Thresholds from the optional vars SIGNATURE_ISSUE_MIN_REJECTIONS, SIGNATURE_ISSUE_OPEN_PERCENT,
 * SIGNATURE_ISSUE_RESOLVE_PERCENT and SIGNATURE_ISSUE_CRITICAL_PERCENT (docs/operating.md); a var unset or not a
 * number keeps its default, and the resolve bar never sits above the open one.
 */
export function signatureThresholds(env: object): SignatureThresholds {
  const vars = env as Record<string, unknown>;
  const number = (name: string, fallback: number, scale = 1) => {
    const value = Number(vars[name]);
    return typeof vars[name] === "string" && Number.isFinite(value) && value >= 0 ? value / scale : fallback;
  };
  const defaults = DEFAULT_SIGNATURE_THRESHOLDS;
  const openShare = number("SIGNATURE_ISSUE_OPEN_PERCENT", defaults.openShare, 100);
  return {
    ...defaults,
    minRejections: number("SIGNATURE_ISSUE_MIN_REJECTIONS", defaults.minRejections),
    openShare,
    resolveShare: Math.min(openShare, number("SIGNATURE_ISSUE_RESOLVE_PERCENT", defaults.resolveShare, 100)),
    criticalShare: number("SIGNATURE_ISSUE_CRITICAL_PERCENT", defaults.criticalShare, 100),
  };
}
