import { isLocalDevelopment } from "./local-development";

/**
 * Local only: outages the bench's faulted soak (`npm run bench -- --only soak --faults …`) switches on in a running
 * `wrangler dev`, so that D1 or R2 fail the way the platform's do while traffic keeps arriving. Nothing of ours is
 * replaced: every D1 call (src/lib/meter.ts, the one way to D1) and every use of the bodies bucket
 * (src/bodies/stored-bodies.ts) asks `failDuringLocalOutage` first, and it throws only while an outage switched on
 * here lasts.
 *
 * Reached through the scheduled handler with a cron string no wrangler.toml schedules (`local-fault:d1:60000`: D1
 * unavailable for 60 s from now; `:0` ends it), the way `local-restart-requeue` is, so a deployed Worker's own cron
 * never runs it and no route exposes it; and refused unless `.dev.vars` says LOCAL_DEVELOPMENT (never deployed).
 * The outage lives in the isolate's memory: locally one isolate serves the Worker, its shards and its consumer,
 * and a restart of the dev server ends it.
 */

export const LOCAL_FAULT_CRON_PREFIX = "local-fault:";

export const LOCAL_FAULT_KINDS = ["d1", "r2"] as const;
export type LocalFaultKind = (typeof LOCAL_FAULT_KINDS)[number];

/** Until when each outage lasts (epoch ms); absent when none was switched on. */
const outageUntil = new Map<LocalFaultKind, number>();

export class LocalFaultRefused extends Error {
  override name = "LocalFaultRefused";
}

/** What a `local-fault:<kind>:<ms>` cron string asks for, or null when it is not one. Pure. */
export function parseLocalFault(cron: string): { kind: LocalFaultKind; durationMs: number } | null {
  const match = /^local-fault:([a-z0-9]+):(\d{1,9})$/.exec(cron);
  if (!match || !(LOCAL_FAULT_KINDS as readonly string[]).includes(match[1]!)) return null;
  return { kind: match[1] as LocalFaultKind, durationMs: Number(match[2]) };
}

/** The scheduled handler's switch: refused unless local; otherwise the outage runs from now for the duration asked. */
export function switchLocalFault(env: object, cron: string, now = Date.now()): void {
  if (!isLocalDevelopment(env)) {
    throw new LocalFaultRefused(
      `${LOCAL_FAULT_CRON_PREFIX}… is for wrangler dev only (LOCAL_DEVELOPMENT="true" in .dev.vars); nothing was switched`,
    );
  }
  const fault = parseLocalFault(cron);
  if (!fault) throw new LocalFaultRefused(`${JSON.stringify(cron)} names no local fault (${LOCAL_FAULT_KINDS})`);
  if (fault.durationMs === 0) outageUntil.delete(fault.kind);
  else outageUntil.set(fault.kind, now + fault.durationMs);
}

/** Throws the platform's own kind of error while a local outage of `kind` lasts; otherwise does nothing. */
export function failDuringLocalOutage(kind: LocalFaultKind, now = Date.now()): void {
  const until = outageUntil.get(kind);
  if (until === undefined) return;
  if (now >= until) {
    outageUntil.delete(kind);
    return;
  }
  throw new Error(
    kind === "d1"
      ? "D1_ERROR: Network connection lost. (local fault injection)"
      : "R2 unavailable: we encountered an internal error (local fault injection)",
  );
}
