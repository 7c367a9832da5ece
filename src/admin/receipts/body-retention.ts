import { dayOfSegmentKey, parseSegmentLocation, segmentDayExpiresAt } from "../../bodies/segment-format";
import { bodyDropsAt } from "../../reconcile/retention-scan";
import { SourceConfigError } from "../../sources/config";
import { lookupSource } from "../../sources/registry";

/** When this receipt's body goes, under its source's retention as configured now (null: see bodyDropsAt). */
export function bodyDropsAtFor(
  env: { SOURCES?: Env["SOURCES"] },
  receipt: { source: string; status: string; receivedAt: number; bodyRetained: boolean; bodyLocation?: string | null },
): number | null {
  const retention = env.SOURCES === undefined ? null : retentionOf(env as Pick<Env, "SOURCES">, receipt.source);
  const dropsAt = bodyDropsAt(receipt, retention);
  // A body in a segment goes with its whole day (src/bodies/segment-format.ts), up to a day after its own time; a
  // dead letter's is copied out first, so keeps its own.
  const day = dayOfSegmentKey(parseSegmentLocation(receipt.bodyLocation ?? null)?.key ?? "");
  if (dropsAt === null || day === null || retention === null || receipt.status === "dead") return dropsAt;
  return Math.max(dropsAt, segmentDayExpiresAt(day, retention.payloadRetentionMs));
}

function retentionOf(env: Pick<Env, "SOURCES">, source: string) {
  try {
    const found = lookupSource(env, source);
    return found.kind === "valid" ? found.source : null;
  } catch (error) {
    // SOURCES itself unreadable: no source is configured, so no retention runs.
    if (error instanceof SourceConfigError) return null;
    throw error;
  }
}
