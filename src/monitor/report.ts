import { sql } from "drizzle-orm";
import { database } from "../db/client";
import type { Observation } from "./observation";

/** The one system monitor (src/reconcile/system-monitor.ts), reached through its binding so no layer imports it. */
export function systemMonitor(env: Pick<Env, "MONITOR">) {
  return env.MONITOR.get(env.MONITOR.idFromName("system"));
}

export async function reportObservations(
  env: Pick<Env, "MONITOR">,
  observations: Observation[],
  d1Reachable: boolean,
): Promise<void> {
  await systemMonitor(env).report(observations, { d1Reachable });
}

/** Whether D1 answers at all: one trivial query, asked only after something already failed (or once per cron run). */
export async function d1Answers(env: Pick<Env, "DB">): Promise<{ reachable: boolean; sizeBytes: number | null }> {
  try {
    const result = await database(env).run(sql`SELECT 1`);
    const size = (result.meta as { size_after?: number }).size_after;
    return { reachable: true, sizeBytes: typeof size === "number" ? size : null };
  } catch {
    return { reachable: false, sizeBytes: null };
  }
}
