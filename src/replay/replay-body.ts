import { segmentBodyExpired } from "../bodies/segment-format";
import { loadSources } from "../sources/registry";

/**
 * Whether a receipt still has a body to replay. A body in a segment leaves its row's location in place when its
 * day's segment is deleted (retention writes no row for it), so a segment past its source's payload retention
 * counts as dropped here, whether or not the cron has deleted it yet: a replay accepted now would find no body.
 */
export function bodyStillKept(
  env: Env,
  receipt: { source: string; bodyRetained: number | boolean; bodyLocation: string | null },
  now: number,
): boolean {
  if (!receipt.bodyRetained) return false;
  const retentionMs = loadSources(env).get(receipt.source)?.payloadRetentionMs;
  return retentionMs === undefined || !segmentBodyExpired(receipt.bodyLocation, retentionMs, now);
}
