import type { SourceConfig } from "../sources/config";
import type { AlertCondition, AlertDetail } from "./alerts";
import { pendingAlertAfterMs } from "../sources/reconciler-settings";

/**
 * The conditions the cron watches, for every source at once, read from D1 after the shard sweep has flushed
 * what the claim shards held (so a delivery acknowledged a moment ago counts). A handful of aggregate reads and
 * one batch of writes per run, however many sources there are:
 *   silence       no live delivery for longer than expect_within (a source that never had one is timed from
 *                 the first run that watched it);
 *   dead-letters  the dead count grew since the last run; resolved once it is back to the count before the
 *                 incident (the new dead letters were replayed or expired);
 *   pending-age   the oldest receipt still pending or processing waited longer than alert_pending_after.
 */

function minutes(ms: number): string {
  const total = Math.round(ms / 60_000);
  return total >= 120 ? `${Math.round(total / 60)} h` : `${total} min`;
}

interface Snapshot {
  lastLive: Map<string, number | null>;
  dead: Map<string, number>;
  waiting: Map<string, { oldest: number; waiting: number }>;
  deadSeen: Map<string, number>;
  watchedSince: Map<string, number>;
  deadIncidentBaseline: Map<string, number>;
}

async function snapshot(env: Env, sources: readonly SourceConfig[]): Promise<Snapshot> {
  const silenceWatched = sources.filter((source) => source.expectWithinMs !== null).map((source) => source.name);
  const [lastLive, dead, waiting, checkpoints, openDead] = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(
      `SELECT c.value AS source,
         (SELECT MAX(received_at) FROM receipts WHERE source = c.value AND provenance = 'live') AS lastLive
       FROM json_each(?) AS c`,
    ).bind(JSON.stringify(silenceWatched)),
    env.DB.prepare("SELECT source, COUNT(*) AS dead FROM receipts WHERE status = 'dead' GROUP BY source"),
    env.DB.prepare(
      "SELECT source, MIN(received_at) AS oldest, COUNT(*) AS waiting FROM receipts WHERE status IN ('pending', 'processing') GROUP BY source",
    ),
    env.DB.prepare("SELECT source, reconciler, cursor FROM checkpoints WHERE reconciler IN ('dead-letters', 'silence-watch')"),
    env.DB.prepare("SELECT source, detail FROM alerts WHERE kind = 'dead-letters' AND state = 'open'"),
  ]);
  const rows = <T>(result: D1Result<Record<string, unknown>> | undefined) => (result?.results ?? []) as T[];
  const cursorOf = (reconciler: string) =>
    new Map(
      rows<{ source: string; reconciler: string; cursor: string }>(checkpoints)
        .filter((row) => row.reconciler === reconciler)
        .map((row) => [row.source, JSON.parse(row.cursor) as Record<string, number>] as const),
    );
  return {
    lastLive: new Map(rows<{ source: string; lastLive: number | null }>(lastLive).map((row) => [row.source, row.lastLive])),
    dead: new Map(rows<{ source: string; dead: number }>(dead).map((row) => [row.source, row.dead])),
    waiting: new Map(rows<{ source: string; oldest: number; waiting: number }>(waiting).map((row) => [row.source, row])),
    deadSeen: new Map([...cursorOf("dead-letters")].map(([source, cursor]) => [source, cursor.dead ?? 0])),
    watchedSince: new Map([...cursorOf("silence-watch")].map(([source, cursor]) => [source, cursor.since ?? 0])),
    deadIncidentBaseline: new Map(
      rows<{ source: string; detail: string | null }>(openDead).map((row) => [
        row.source,
        (row.detail ? (JSON.parse(row.detail) as AlertDetail).facts?.baseline : undefined) ?? 0,
      ]),
    ),
  };
}

export async function watchSources(env: Env, sources: readonly SourceConfig[], now: number): Promise<AlertCondition[]> {
  if (sources.length === 0) return [];
  const seen = await snapshot(env, sources);
  const conditions: AlertCondition[] = [];
  const checkpointWrites: D1PreparedStatement[] = [];
  const writeCheckpoint = (source: string, reconciler: string, cursor: unknown) =>
    checkpointWrites.push(
      env.DB.prepare(
        `INSERT INTO checkpoints (source, reconciler, cursor, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (source, reconciler) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at`,
      ).bind(source, reconciler, JSON.stringify(cursor), now),
    );

  for (const source of sources) {
    if (source.expectWithinMs !== null) {
      let quietSince = seen.lastLive.get(source.name) ?? null;
      if (quietSince === null) {
        quietSince = seen.watchedSince.get(source.name) ?? now;
        if (!seen.watchedSince.has(source.name)) writeCheckpoint(source.name, "silence-watch", { since: now });
      }
      const quietMs = now - quietSince;
      conditions.push({
        source: source.name,
        kind: "silence",
        firing: quietMs > source.expectWithinMs,
        message: `no live delivery for ${minutes(quietMs)} (expected within ${minutes(source.expectWithinMs)})`,
      });
    }

    const dead = seen.dead.get(source.name) ?? 0;
    const previous = seen.deadSeen.get(source.name) ?? 0;
    if (dead !== previous || !seen.deadSeen.has(source.name)) writeCheckpoint(source.name, "dead-letters", { dead });
    const openBaseline = seen.deadIncidentBaseline.get(source.name);
    const baseline = openBaseline ?? previous;
    conditions.push({
      source: source.name,
      kind: "dead-letters",
      firing: dead > baseline,
      message: `${dead} dead receipts (was ${baseline})`,
      facts: { baseline, dead },
    });

    const waiting = seen.waiting.get(source.name);
    const thresholdMs = pendingAlertAfterMs(source);
    const ageMs = waiting ? now - waiting.oldest : 0;
    conditions.push({
      source: source.name,
      kind: "pending-age",
      firing: ageMs > thresholdMs,
      message: `${waiting?.waiting ?? 0} receipts waiting, the oldest for ${minutes(ageMs)} (alert after ${minutes(thresholdMs)})`,
    });
  }
  if (checkpointWrites.length > 0) await env.DB.batch(checkpointWrites);
  return conditions;
}

/**
 * Catch-up found events we never received: open while runs keep finding them (or GitHub deliveries stay missing
 * after the redeliveries we ask for), resolved by a run that finds none.
 */
export function catchUpMissing(
  source: SourceConfig,
  found: { missingClaimed: number; redeliveriesRequested: number; redeliveriesWithheld: number },
): AlertCondition {
  const parts = [
    found.missingClaimed > 0 ? `${found.missingClaimed} events the provider listed were never delivered (claimed by catch-up)` : null,
    found.redeliveriesRequested > 0 ? `${found.redeliveriesRequested} failed deliveries never received (redelivery requested)` : null,
    found.redeliveriesWithheld > 0 ? `${found.redeliveriesWithheld} still missing after repeated redeliveries (needs a look)` : null,
  ].filter((part): part is string => part !== null);
  return {
    source: source.name,
    kind: "catch-up-missing",
    firing: parts.length > 0,
    message: parts.join("; ") || "catch-up found nothing missing",
    facts: { ...found },
  };
}
