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
  detail?: string;
}

export function healthAnswer(invalidSources: readonly string[], openSystemAlerts: readonly string[], sourcesMissingSecrets: readonly string[] = []): HealthAnswer {
  const reasons = [
    ...(invalidSources.length > 0 ? ["config-invalid"] : []),
    ...(sourcesMissingSecrets.length > 0 ? ["secrets-missing"] : []),
    ...new Set(openSystemAlerts),
  ];
  if (reasons.length === 0) return { status: "ok" };
  return {
    status: "degraded",
    reasons,
    ...(invalidSources.length > 0 ? { invalidSources: [...invalidSources] } : {}),
    ...(sourcesMissingSecrets.length > 0 ? { sourcesMissingSecrets: [...sourcesMissingSecrets].sort() } : {}),
    detail: "GET /admin/api/health explains each reason; GET /admin/api/sources names each config problem and missing secret.",
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
