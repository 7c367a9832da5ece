import type { RouteRecovery } from "../gate/client";
import { deliveryGate } from "../gate/client";
import { logEvent } from "../lib/log";
import { ulid } from "../lib/ulid";
import { startJob } from "./replay-jobs";

/**
 * A route's recovery (docs/operating.md, "Recovery when a route's breaker closes"): with `recover = "auto"`, when its
 * circuit breaker closes again (a probe went through), the route's deliveries that died since its run of failures
 * began are replayed as one bulk replay job (replay-jobs.ts) — that route's dead deliveries only, oldest first, each
 * once, ramping up step by step (`stepLimit`) and admitted by the route's gate under its rate_limit and
 * max_in_flight like any delivery. The job's key is recorded on the gate, so the route's view shows it.
 */

/**
 * How far before the first failure's release a delivery may have died and belong to the run: an attempt's death is
 * committed before its gate hears of it, at most one lease (src/consumers/lease/lease.ts) earlier.
 */
export const RECOVERY_LOOKBACK_MS = 5 * 60_000;

export async function startRecoveries(env: Env, recoveries: readonly RouteRecovery[]): Promise<void> {
  for (const { source, route, failingSince } of recoveries) {
    // The job runs on the real clock: a consumer's `now` may be a test's, and a replay is due at its own time.
    const startedAt = Date.now();
    const job = await startJob(
      env,
      {
        filter: { source, route, status: "dead", enteredSince: Math.max(0, failingSince - RECOVERY_LOOKBACK_MS) },
        jobKey: `recover-${ulid(startedAt)}`,
        origin: "recovery",
      },
      startedAt,
    );
    await deliveryGate(env, source, route).noteRecovery(job.jobKey, startedAt);
    logEvent("route.recovery_started", { source, route, job: job.jobKey, replayed: job.replayed });
  }
}
