import type { Health, HealthReason } from "../health/source-health";
import type { Percentiles } from "./percentiles";

/** One source's numbers in a stats report (./stats.ts says where each comes from). */
export interface SourceStats {
  source: string;
  configured: boolean;
  received: number;
  processed: number;
  stale: number;
  skipped: number;
  dead: number;
  /** Dead letters an operator dismissed (the cause was fixed, or they are not worth replaying). */
  dismissed: number;
  pending: number;
  reconciled: number;
  replayed: number;
  quarantined: number;
  duplicates: number | null;
  /** Start of each hour (epoch ms) with its live duplicate count; single-source reports only. */
  duplicatesByHour: { hour: number; deliveries: number }[] | null;
  rejectedSignatures: number | null;
  deadTotal: number;
  oldestPendingReceivedAt: number | null;
  oldestPendingAgeMs: number | null;
  openAlerts: number;
  ackLatencyMs: Percentiles | null;
  pickupLatencyMs: Percentiles;
  processingLatencyMs: Percentiles;
  attemptDurationMs: Percentiles;
  health: Health;
  /** Why the health is what it is: empty when "ok". */
  healthReasons: HealthReason[];
}
