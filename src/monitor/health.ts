import { systemMonitor } from "./report";

/**
 * What GET /health answers: "ok", or "degraded" (still 200, so load balancers do not flap) with the reasons by
 * name. Names only: the route is unauthenticated; GET /admin/api/health has the details.
 */
export interface HealthAnswer {
  status: "ok" | "degraded";
  reasons?: string[];
  invalidSources?: string[];
  detail?: string;
}

export function healthAnswer(invalidSources: readonly string[], openSystemAlerts: readonly string[]): HealthAnswer {
  const reasons = [...(invalidSources.length > 0 ? ["config-invalid"] : []), ...new Set(openSystemAlerts)];
  if (reasons.length === 0) return { status: "ok" };
  return {
    status: "degraded",
    reasons,
    ...(invalidSources.length > 0 ? { invalidSources: [...invalidSources] } : {}),
    detail: "GET /admin/api/health explains each reason; GET /admin/api/sources names each config problem.",
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
