import { D1_STORAGE_ALERT_FRACTION } from "../../monitor/conditions";
import type { systemHealth } from "../health/system-health";

/**
 * What the dashboard's System panel says, decided from what GET /admin/api/health answers (`systemHealth`): the
 * incidents the system monitor holds, how full each receipt database is, and which sources lack a secret. Pure,
 * so the page only lays it out.
 */

export type SystemHealth = Awaited<ReturnType<typeof systemHealth>>;
export type SystemIncident = SystemHealth["systemAlerts"][number];

/** Highlighted from the same fraction at which the cron opens a d1-storage incident. */
export const DATABASE_NEAR_CAP_FRACTION = D1_STORAGE_ALERT_FRACTION;

export interface DatabaseSize {
  binding: string;
  bytes: number | null;
  /** bytes / the 10 GB cap, unrounded (the answer's usedFraction is rounded to 4 places). */
  fraction: number | null;
  state: "ok" | "near-cap" | "silent";
}

export interface SystemSummary {
  open: SystemIncident[];
  /** Resolved, but D1's alerts table does not say so yet: shown muted until it does. */
  resolvedUnrecorded: SystemIncident[];
  monitorError: string | null;
  /** Null when the sizes could not be read at all. */
  databases: DatabaseSize[] | null;
  capBytes: number | null;
  missingSecrets: { source: string; secrets: string[] }[];
  /** Sources every signing secret of which has expired, with those names. */
  expiredSecrets: { source: string; secrets: string[] }[];
  allWell: boolean;
}

export function summarizeSystem(health: SystemHealth): SystemSummary {
  const open = health.systemAlerts.filter((incident) => incident.state === "open");
  const resolvedUnrecorded = health.systemAlerts.filter(
    (incident) => incident.state === "resolved" && incident.recordedState !== "resolved",
  );
  const storage = health.storage;
  const databases =
    storage?.d1Databases.map(({ binding, bytes }): DatabaseSize => {
      const fraction = bytes === null ? null : bytes / storage.d1CapBytes;
      const state = fraction === null ? "silent" : fraction > DATABASE_NEAR_CAP_FRACTION ? "near-cap" : "ok";
      return { binding, bytes, fraction, state };
    }) ?? null;
  const bySource = (secretsBySource: Record<string, string[]>) =>
    Object.entries(secretsBySource)
      .map(([source, secrets]) => ({ source, secrets }))
      .sort((a, b) => a.source.localeCompare(b.source));
  const missingSecrets = bySource(health.missingSecrets);
  const expiredSecrets = bySource(health.expiredSecrets);
  const allWell =
    open.length === 0 &&
    health.monitorError === null &&
    missingSecrets.length === 0 &&
    expiredSecrets.length === 0 &&
    databases !== null &&
    databases.every((database) => database.state === "ok");
  return {
    open,
    resolvedUnrecorded,
    monitorError: health.monitorError,
    databases,
    capBytes: storage?.d1CapBytes ?? null,
    missingSecrets,
    expiredSecrets,
    allWell,
  };
}

/** The claim shards' total and largest, when the shards were asked (the System page asks; the overview does not). */
export function shardTotals(
  health: SystemHealth,
): { count: number; totalBytes: number; largest: { shard: string; bytes: number } | null } | null {
  const shards = health.storage?.shards;
  if (!shards) return null;
  const largest = shards.reduce<{ shard: string; bytes: number } | null>(
    (fullest, shard) => (fullest === null || shard.bytes > fullest.bytes ? shard : fullest),
    null,
  );
  return { count: shards.length, totalBytes: shards.reduce((total, shard) => total + shard.bytes, 0), largest };
}

const INCIDENT_KINDS: Record<string, string> = {
  "d1-unreachable": "D1 unreachable",
  "relay-failing": "Relay failing",
  "cron-failed": "Cron failed",
  "shard-backlog": "Claim shard backlog",
  "shard-storage": "Claim shard storage",
  "shard-full": "Claim shard full: new events refused",
  "d1-storage": "Database storage",
  "d1-full": "Database full: relay held back",
  "database-unbound": "Database no longer bound",
  "route-breaker-open": "Route circuit breaker open",
};

export function incidentLabel(kind: string): string {
  return INCIDENT_KINDS[kind] ?? kind;
}

/** "12 MB", "2.4 MB", "0.04 MB", "2.31 GB": megabytes, as the operator compares them with the 10 GB cap. */
export function formatMegabytes(bytes: number): string {
  const megabytes = bytes / 1024 ** 2;
  if (megabytes >= 1024) return `${(megabytes / 1024).toFixed(2)} GB`;
  if (megabytes >= 10) return `${Math.round(megabytes)} MB`;
  return megabytes >= 1 ? `${megabytes.toFixed(1)} MB` : `${megabytes.toFixed(2)} MB`;
}

export function formatPercent(fraction: number): string {
  return `${(fraction * 100).toFixed(1)} %`;
}
