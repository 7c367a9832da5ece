import { systemMonitor } from "./report";

/**
 * What GET /health answers: "ok", or "degraded" (still 200, so load balancers do not flap) with the reasons by
 * name. Names only: the route is unauthenticated; GET /admin/api/health has the details.
 */
export interface HealthAnswer {
  status: "ok" | "degraded";
  reasons?: string[];
  invalidSources?: string[];
  /** Valid sources answering 503 because a secret they need is not set (names of sources, never of secrets). */
  sourcesMissingSecrets?: string[];
  /** Valid sources answering 503 because every signing secret they list is past its `expires` (source names only). */
  sourcesWithExpiredSecrets?: string[];
  detail?: string;
}

/** What else keeps sources or the admin surface from working: names of sources only. */
export interface HealthFacts {
  /** Valid sources none of whose signing secrets (or verify tokens) is set. */
  missingSecrets?: readonly string[];
  /** Valid sources every signing secret of which is past its `expires`. */
  expiredSecrets?: readonly string[];
  /**
   * ADMIN_TOKEN is a value the repository ships as an example, so the admin surface is shut (src/admin/guards/auth.ts)
   * and GET /admin/api/health cannot say why: the reason "admin-token-example" says it here.
   */
  adminTokenIsExample?: boolean;
  /** RELAY_HELD_BACK or RELAY_DELAY_MS is not honoured as written (src/claims/relay-settings.ts). */
  relaySettingsRefused?: boolean;
}

export function healthAnswer(
  invalidSources: readonly string[],
  openSystemAlerts: readonly string[],
  facts: HealthFacts = {},
): HealthAnswer {
  const { missingSecrets = [], expiredSecrets = [], adminTokenIsExample = false, relaySettingsRefused = false } = facts;
  const reasons = [
    ...(invalidSources.length > 0 ? ["config-invalid"] : []),
    ...(missingSecrets.length > 0 ? ["secrets-missing"] : []),
    ...(expiredSecrets.length > 0 ? ["secrets-expired"] : []),
    ...(adminTokenIsExample ? ["admin-token-example"] : []),
    ...(relaySettingsRefused ? ["relay-settings-refused"] : []),
    ...new Set(openSystemAlerts),
  ];
  if (reasons.length === 0) return { status: "ok" };
  return {
    status: "degraded",
    reasons,
    ...(invalidSources.length > 0 ? { invalidSources: [...invalidSources] } : {}),
    ...(missingSecrets.length > 0 ? { sourcesMissingSecrets: [...missingSecrets].sort() } : {}),
    ...(expiredSecrets.length > 0 ? { sourcesWithExpiredSecrets: [...expiredSecrets].sort() } : {}),
    detail: adminTokenIsExample
      ? "ADMIN_TOKEN is the shipped example value, so the admin API and dashboard are shut: set a new one with wrangler secret put ADMIN_TOKEN."
      : "GET /admin/api/health explains each reason; GET /admin/api/sources names each config problem, missing secret and expired secret.",
  };
}

/** Kinds of the open system alerts; "monitor-unreachable" when the monitor itself does not answer. */
export async function openSystemAlertKinds(env: Pick<Env, "MONITOR">): Promise<string[]> {
  try {
    return (await systemMonitor(env).list()).filter((alert) => alert.state === "open").map((alert) => alert.kind);
  } catch {
    return ["monitor-unreachable"];
  }
}
