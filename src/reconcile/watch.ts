import { and, count, eq, inArray, max, min } from "drizzle-orm";
import { batchByName, batchEach } from "../db/batch";
import { database, type Database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { alerts, checkpoints, receipts } from "../db/schema";
import type { SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";
import type { AlertCondition, AlertDetail } from "./alerts";
import { pendingAlertAfterMs } from "../sources/reconciler-settings";
import { checkpointWrite, parseCursor } from "./checkpoints";
import { plural } from "../lib/plural";

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

/**
 * What the watch needs, read in one D1 batch: receipts and cursors from the sources' database, open alerts from
 * `alertsDb` (the system database, `DB`). When the sources live in `DB` too it is all one batch; otherwise the
 * alerts are a second call.
 */
async function snapshot(db: Database, sources: readonly SourceConfig[], alertsDb: Database | null): Promise<Snapshot> {
  const silenceWatched = sources.filter((source) => source.expectWithinMs !== null).map((source) => source.name);
  const openDeadAlerts = (from: Database) =>
    from
      .select({ source: alerts.source, detail: alerts.detail })
      .from(alerts)
      .where(and(eq(alerts.kind, "dead-letters"), eq(alerts.state, "open")));
  const receiptQueries = {
    lastLive: db
      .select({ source: receipts.source, lastLive: max(receipts.receivedAt) })
      .from(receipts)
      .where(and(inJsonList(receipts.source, silenceWatched), eq(receipts.provenance, "live")))
      .groupBy(receipts.source),
    dead: db
      .select({ source: receipts.source, dead: count() })
      .from(receipts)
      .where(eq(receipts.status, "dead"))
      .groupBy(receipts.source),
    waiting: db
      .select({ source: receipts.source, oldest: min(receipts.receivedAt), waiting: count() })
      .from(receipts)
      .where(inArray(receipts.status, ["pending", "processing"]))
      .groupBy(receipts.source),
    cursors: db
      .select({ source: checkpoints.source, reconciler: checkpoints.reconciler, cursor: checkpoints.cursor })
      .from(checkpoints)
      .where(inArray(checkpoints.reconciler, ["dead-letters", "silence-watch"])),
  };
  const [read, openDead] =
    alertsDb === null
      ? await batchByName(db, { ...receiptQueries, openDead: openDeadAlerts(db) }).then(({ openDead, ...rest }) => [rest, openDead] as const)
      : await Promise.all([batchByName(db, receiptQueries), openDeadAlerts(alertsDb)]);
  const cursorOf = (reconciler: string) =>
    new Map(
      read.cursors
        .filter((row) => row.reconciler === reconciler)
        .map((row) => [row.source, parseCursor<Record<string, number>>(row.cursor) ?? {}] as const),
    );
  return {
    lastLive: new Map(read.lastLive.map((row) => [row.source, row.lastLive])),
    dead: new Map(read.dead.map((row) => [row.source, row.dead])),
    waiting: new Map(read.waiting.flatMap((row) => (row.oldest === null ? [] : [[row.source, { oldest: row.oldest, waiting: row.waiting }] as const]))),
    deadSeen: new Map([...cursorOf("dead-letters")].map(([source, cursor]) => [source, cursor.dead ?? 0])),
    watchedSince: new Map([...cursorOf("silence-watch")].map(([source, cursor]) => [source, cursor.since ?? 0])),
    deadIncidentBaseline: new Map(
      openDead.flatMap((row) =>
        row.source === null ? [] : [[row.source, (row.detail ? (JSON.parse(row.detail) as AlertDetail).facts?.baseline : undefined) ?? 0] as const],
      ),
    ),
  };
}

/** Every source's conditions, each read from the database its receipts live in (src/sources/databases.ts). */
export async function watchSources(env: Env, sources: readonly SourceConfig[], now: number): Promise<AlertCondition[]> {
  const conditions: AlertCondition[] = [];
  for (const { binding, env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const inDatabase = sources.filter((source) => source.database === binding);
    if (inDatabase.length === 0) continue;
    const alertsDb = databaseEnv === env ? null : database(env);
    conditions.push(...(await watchDatabase(database(databaseEnv), alertsDb, inDatabase, now)));
  }
  return conditions;
}

async function watchDatabase(db: Database, alertsDb: Database | null, sources: readonly SourceConfig[], now: number): Promise<AlertCondition[]> {
  const seen = await snapshot(db, sources, alertsDb);
  const conditions: AlertCondition[] = [];
  const cursorWrites: { source: string; reconciler: string; cursor: unknown }[] = [];
  const writeCheckpoint = (source: string, reconciler: string, cursor: unknown) => cursorWrites.push({ source, reconciler, cursor });

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
      message: `${plural(dead, "dead receipt")} (was ${baseline})`,
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
  await batchEach(db, cursorWrites, (write) => checkpointWrite(db, write.source, write.reconciler, write.cursor, now));
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
