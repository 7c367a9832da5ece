import { isLocalDevelopment } from "./local-development";

/**
 * Rejected deliveries counted under `wrangler dev`, where Analytics Engine keeps nothing to read back: a tally per
 * source and hour in the dev server's memory (one isolate serves every request locally), since the server started
 * or last reloaded. Only with LOCAL_DEVELOPMENT (from .dev.vars, which is never deployed), so a deployed Worker
 * neither keeps it nor reports it; and never a D1 row, so a flood of forgeries costs no writes.
 */

const HOUR_MS = 3_600_000;
/** Hours kept: the charts' day, and a little more. */
const KEPT_HOURS = 48;

const tally = new Map<string, Map<number, number>>();

export function countLocalRejection(env: object, source: string, now = Date.now()): void {
  if (!isLocalDevelopment(env)) return;
  const hour = Math.floor(now / HOUR_MS) * HOUR_MS;
  const byHour = tally.get(source) ?? new Map<number, number>();
  tally.set(source, byHour);
  byHour.set(hour, (byHour.get(hour) ?? 0) + 1);
  for (const kept of byHour.keys()) if (kept < hour - KEPT_HOURS * HOUR_MS) byHour.delete(kept);
}

/** Each source's rejections per hour since `since`; null when this is not a local dev server. */
export function localRejections(env: object, since: number, source?: string): Map<string, Map<number, number>> | null {
  if (!isLocalDevelopment(env)) return null;
  const fromHour = Math.floor(since / HOUR_MS) * HOUR_MS;
  const result = new Map<string, Map<number, number>>();
  for (const [name, byHour] of tally) {
    if (source !== undefined && name !== source) continue;
    result.set(name, new Map([...byHour].filter(([hour]) => hour >= fromHour)));
  }
  return result;
}
