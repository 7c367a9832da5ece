import { and, count, eq, inArray, max, min, sql } from "drizzle-orm";
import { batchByName, batchEach } from "../db/batch";
import { checkpointWrite, parseCursor } from "../db/checkpoints";
import { type Database, database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { alerts, checkpoints, deliveries, receipts } from "../db/schema";
import { plural } from "../lib/plural";
import { DEFAULT_DATABASE_BINDING, type SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";
import { homeDatabaseOf } from "../sources/partitions";
import { pendingAlertAfterMs } from "../sources/reconciler-settings";
import type { AlertCondition, AlertDetail } from "./alerting";

/**
 * The conditions the cron watches, for every source at once, read from D1 after the shard sweep has flushed
 * what the claim shards held (so a delivery acknowledged a moment ago counts). A handful of aggregate reads and
 * one batch of writes per run, however many sources there are:
 *   silence       no live delivery for longer than expect_within (a source that never had one is timed from
 *                 the first run that watched it);
 *   dead-letters  the dead count grew since the last run; resolved once it is back to the count before the
 *                 incident (the new dead letters were replayed or expired);
 *   pending-age   the oldest delivery still pending or processing waited longer than alert_pending_after.
 * Both count every delivery: the one a receipt row carries and each further route's row in `deliveries`.
 */

function minutes(ms: number): string {
  const total = Math.round(ms / 60_000);
  return total >= 120 ? `${Math.round(total / 60)} h` : `${total} min`;
}

/** What the watch reads about each source in one database. */
interface Numbers {
  lastLive: Map<string, number | null>;
  dead: Map<string, number>;
  waiting: Map<string, { oldest: number; waiting: number }>;
  deadSeen: Map<string, number>;
  watchedSince: Map<string, number>;
}

interface Snapshot extends Numbers {
  deadIncidentBaseline: Map<string, number>;
}

type OpenDeadAlert = { source: string | null; detail: string | null };

/** Dead counts per source, the receipts' own and their further deliveries' added together. */
function sumBySource(rows: readonly { source: string; dead: number }[]): Map<string, number> {
  const sums = new Map<string, number>();
  for (const row of rows) sums.set(row.source, (sums.get(row.source) ?? 0) + row.dead);
  return sums;
}

/** The backlog per source over both homes of a delivery: the earliest received, and how many wait. */
function oldestBySource(
  rows: readonly { source: string; oldest: number | null; waiting: number }[],
): Map<string, { oldest: number; waiting: number }> {
  const merged = new Map<string, { oldest: number; waiting: number }>();
  for (const row of rows) {
    if (row.oldest === null) continue;
    const seen = merged.get(row.source);
    merged.set(row.source, {
      oldest: Math.min(seen?.oldest ?? row.oldest, row.oldest),
      waiting: (seen?.waiting ?? 0) + row.waiting,
    });
  }
  return merged;
}

/**
 * One database's numbers, read in one D1 batch; from `DB` (`withAlerts`) the same batch also reads the open
 * dead-letter incidents, which live there for every source.
 */
async function readDatabase(
  db: Database,
  silenceWatched: readonly string[],
  withAlerts: boolean,
): Promise<{ numbers: Numbers; openDead: OpenDeadAlert[] }> {
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
    // Further deliveries (routes 2–16) are deliveries like the receipt's own: a dead one counts toward the dead
    // letters, a waiting one toward the backlog, its age the receipt's. Read through the partial indexes that hold
    // only those (literal conditions, as the indexes are written), each receipt then by its primary key: rows read
    // are the dead and waiting further deliveries, never the traffic.
    // CROSS JOIN keeps the partial index outside: grouped by source, the planner would rather read every receipt.
    deadDeliveries: db.all<{ source: string; dead: number }>(
      sql`SELECT r.source AS source, COUNT(*) AS dead FROM ${deliveries} AS d INDEXED BY deliveries_dead
        CROSS JOIN ${receipts} AS r WHERE r.id = d.receipt_id AND d.status = 'dead' GROUP BY r.source`,
    ),
    waitingDeliveries: db.all<{ source: string; oldest: number | null; waiting: number }>(
      sql`SELECT r.source AS source, MIN(r.received_at) AS oldest, COUNT(*) AS waiting
        FROM ${deliveries} AS d INDEXED BY deliveries_unfinished CROSS JOIN ${receipts} AS r
        WHERE r.id = d.receipt_id AND d.status IN ('pending', 'processing') GROUP BY r.source`,
    ),
    cursors: db
      .select({ source: checkpoints.source, reconciler: checkpoints.reconciler, cursor: checkpoints.cursor })
      .from(checkpoints)
      .where(inArray(checkpoints.reconciler, ["dead-letters", "silence-watch"])),
  };
  const openDeadAlerts = db
    .select({ source: alerts.source, detail: alerts.detail })
    .from(alerts)
    .where(and(eq(alerts.kind, "dead-letters"), eq(alerts.state, "open")));
  const [read, openDead] = withAlerts
    ? await batchByName(db, { ...receiptQueries, openDead: openDeadAlerts }).then(
        ({ openDead, ...rest }) => [rest, openDead] as const,
      )
    : [await batchByName(db, receiptQueries), []];
  const cursorOf = (reconciler: string) =>
    new Map(
      read.cursors
        .filter((row) => row.reconciler === reconciler)
        .map((row) => [row.source, parseCursor<Record<string, number>>(row.cursor) ?? {}] as const),
    );
  return {
    numbers: {
      lastLive: new Map(read.lastLive.map((row) => [row.source, row.lastLive])),
      dead: sumBySource([...read.dead, ...read.deadDeliveries]),
      waiting: oldestBySource([...read.waiting, ...read.waitingDeliveries]),
      deadSeen: new Map([...cursorOf("dead-letters")].map(([source, cursor]) => [source, cursor.dead ?? 0])),
      watchedSince: new Map([...cursorOf("silence-watch")].map(([source, cursor]) => [source, cursor.since ?? 0])),
    },
    openDead,
  };
}

/**
 * A source's numbers over every database: a source that moved left receipts in the database it moved from, and
 * they still count (the dead ones, the waiting ones, the last live one). Its cursors come from its own database
 * (`home`), or, until the watch first writes them there, from the one it moved from, so a move alone opens no
 * incident.
 */
function acrossDatabases(home: string, perDatabase: readonly { binding: string; numbers: Numbers }[]): Numbers {
  const merged: Numbers = {
    lastLive: new Map(),
    dead: new Map(),
    waiting: new Map(),
    deadSeen: new Map(),
    watchedSince: new Map(),
  };
  const homeFirst = [
    ...perDatabase.filter((entry) => entry.binding === home),
    ...perDatabase.filter((entry) => entry.binding !== home),
  ];
  for (const { numbers } of homeFirst) {
    for (const [source, lastLive] of numbers.lastLive) {
      const known = merged.lastLive.get(source) ?? null;
      merged.lastLive.set(
        source,
        known === null || lastLive === null ? (known ?? lastLive) : Math.max(known, lastLive),
      );
    }
    for (const [source, dead] of numbers.dead) merged.dead.set(source, (merged.dead.get(source) ?? 0) + dead);
    for (const [source, waiting] of numbers.waiting) {
      const known = merged.waiting.get(source);
      merged.waiting.set(
        source,
        known ? { oldest: Math.min(known.oldest, waiting.oldest), waiting: known.waiting + waiting.waiting } : waiting,
      );
    }
    for (const [source, dead] of numbers.deadSeen) if (!merged.deadSeen.has(source)) merged.deadSeen.set(source, dead);
    for (const [source, since] of numbers.watchedSince)
      if (!merged.watchedSince.has(source)) merged.watchedSince.set(source, since);
  }
  return merged;
}

/**
 * Every source's conditions. Every receipt database is read once (a handful of aggregates in one batch, `DB`'s
 * with the open incidents); each source's numbers add up its receipts wherever they are, and its cursors are
 * written to its own database (src/sources/databases.ts).
 */
export async function watchSources(env: Env, sources: readonly SourceConfig[], now: number): Promise<AlertCondition[]> {
  const silenceWatched = sources.filter((source) => source.expectWithinMs !== null).map((source) => source.name);
  const databases = receiptDatabaseEnvs(env);
  const perDatabase = await Promise.all(
    databases.map(async ({ binding, env: databaseEnv }) => ({
      binding,
      ...(await readDatabase(database(databaseEnv), silenceWatched, binding === DEFAULT_DATABASE_BINDING)),
    })),
  );
  const openDead = perDatabase.flatMap((entry) => entry.openDead);
  const deadIncidentBaseline = new Map(
    openDead.flatMap((row) =>
      row.source === null
        ? []
        : [
            [
              row.source,
              (row.detail ? (JSON.parse(row.detail) as AlertDetail).facts?.baseline : undefined) ?? 0,
            ] as const,
          ],
    ),
  );
  const conditions: AlertCondition[] = [];
  for (const { binding, env: databaseEnv } of databases) {
    const inDatabase = sources.filter((source) => homeDatabaseOf(source) === binding);
    if (inDatabase.length === 0) continue;
    const seen: Snapshot = { ...acrossDatabases(binding, perDatabase), deadIncidentBaseline };
    conditions.push(...(await watchDatabase(database(databaseEnv), seen, inDatabase, now)));
  }
  return conditions;
}

/** The conditions of the sources whose database is `db`, from their numbers across databases; their cursors are written to `db`. */
async function watchDatabase(
  db: Database,
  seen: Snapshot,
  sources: readonly SourceConfig[],
  now: number,
): Promise<AlertCondition[]> {
  const conditions: AlertCondition[] = [];
  const cursorWrites: { source: string; reconciler: string; cursor: unknown }[] = [];
  const writeCheckpoint = (source: string, reconciler: string, cursor: unknown) =>
    cursorWrites.push({ source, reconciler, cursor });

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
      message: `${plural(dead, "dead delivery", "dead deliveries")} (was ${baseline})`,
      facts: { baseline, dead },
    });

    const waiting = seen.waiting.get(source.name);
    const thresholdMs = pendingAlertAfterMs(source);
    const ageMs = waiting ? now - waiting.oldest : 0;
    conditions.push({
      source: source.name,
      kind: "pending-age",
      firing: ageMs > thresholdMs,
      message: `${waiting?.waiting ?? 0} deliveries waiting, the oldest for ${minutes(ageMs)} (alert after ${minutes(thresholdMs)})`,
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
    found.missingClaimed > 0
      ? `${found.missingClaimed} events the provider listed were never delivered (claimed by catch-up)`
      : null,
    found.redeliveriesRequested > 0
      ? `${found.redeliveriesRequested} failed deliveries never received (redelivery requested)`
      : null,
    found.redeliveriesWithheld > 0
      ? `${found.redeliveriesWithheld} still missing after repeated redeliveries (needs a look)`
      : null,
  ].filter((part): part is string => part !== null);
  return {
    source: source.name,
    kind: "catch-up-missing",
    firing: parts.length > 0,
    message: parts.join("; ") || "catch-up found nothing missing",
    facts: { ...found },
  };
}
