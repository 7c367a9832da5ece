import { and, asc, eq, gt, inArray, sql } from "drizzle-orm";
import { clampQueueDelay } from "../consumers/decide/decide";
import { database } from "../db/client";
import { deliveries, receipts } from "../db/schema";
import { isLocalDevelopment } from "../lib/local-development";
import { logError, logEvent } from "../lib/log";
import { enqueueReceipts, enqueueWork } from "../relay/enqueue";
import { receiptDatabaseEnvs } from "../sources/databases";
import { loadSources } from "../sources/registry";
import { sweepShards } from "./redrive";

/**
 * Local only: what `npm start` (scripts/dev.mjs) asks for once the dev server answers, after a start and after each
 * reload. `wrangler dev` keeps its queue in memory, so a restart or a reload (saving wrangler.toml or a file under
 * src/) drops every message in it, and the cron's re-drive would find their receipts only after its 10 min
 * grace. Here every unfinished receipt gets a message again, with what is left of its delay, and every claim shard
 * relays what it holds. Deployed, Cloudflare Queues keep messages across deploys, so this is refused there.
 *
 * Reached through the scheduled handler with a cron string no wrangler.toml schedules, so a deployed Worker's own
 * cron never runs it and no route exposes it; and refused unless `.dev.vars` says LOCAL_DEVELOPMENT (never deployed).
 */
export const RESTART_REQUEUE_CRON = "local-restart-requeue";

/** Receipts read per statement. */
const PAGE_ROWS = 500;

/**
 * Once per boot of the dev server: a reload starts a fresh isolate (and a fresh queue), so this module's state is
 * what says whether this boot's queue has been refilled. dev.mjs asks every few seconds; only the first ask works.
 */
let thisBoot: Promise<number> | null = null;

export class RestartRequeueRefused extends Error {
  override name = "RestartRequeueRefused";
}

/** The requeue for the scheduled handler: refused unless local, done once per boot; answers how many were sent. */
export async function requeueAfterRestart(env: Env): Promise<number> {
  if (!isLocalDevelopment(env)) {
    throw new RestartRequeueRefused(
      `${RESTART_REQUEUE_CRON} is for wrangler dev only (LOCAL_DEVELOPMENT="true" in .dev.vars); a deployed queue keeps its messages`,
    );
  }
  if (thisBoot) {
    await thisBoot;
    return 0;
  }
  thisBoot = requeueUnfinished(env, Date.now());
  try {
    return await thisBoot;
  } catch (error) {
    thisBoot = null; // the next ask tries again
    throw error;
  }
}

export interface UnfinishedRow {
  status: string;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
}

/** What is left of a receipt's wait: a retry keeps its due time, a live lease its end; anything else goes now. */
export function remainingDelaySeconds(row: UnfinishedRow, now: number): number {
  const until = row.status === "processing" ? row.leaseUntil : row.nextAttemptAt;
  return until === null || until <= now ? 0 : clampQueueDelay((until - now) / 1000);
}

/** Every pending or processing further delivery of one database back on the queue, on messages naming its route. */
async function requeueUnfinishedDeliveries(databaseEnv: Env, now: number): Promise<number> {
  const db = database(databaseEnv);
  let sent = 0;
  let after: [string, string] = ["", ""];
  for (;;) {
    const page = await db
      .select({
        receiptId: deliveries.receiptId,
        route: deliveries.route,
        source: receipts.source,
        status: deliveries.status,
        nextAttemptAt: deliveries.nextAttemptAt,
        leaseUntil: deliveries.leaseUntil,
      })
      .from(deliveries)
      .innerJoin(receipts, eq(receipts.receiptId, deliveries.receiptId))
      .where(
        and(
          sql`(${deliveries.receiptId}, ${deliveries.route}) > (${after[0]}, ${after[1]})`,
          inArray(deliveries.status, ["pending", "processing"]),
        ),
      )
      .orderBy(asc(deliveries.receiptId), asc(deliveries.route))
      .limit(PAGE_ROWS);
    const groups = new Map<string, { source: string; route: string; delaySeconds: number; receiptIds: string[] }>();
    for (const row of page) {
      const delaySeconds = remainingDelaySeconds(row, now);
      const key = `${row.source}\u0000${row.route}\u0000${delaySeconds}`;
      const group = groups.get(key) ?? { source: row.source, route: row.route, delaySeconds, receiptIds: [] };
      group.receiptIds.push(row.receiptId);
      groups.set(key, group);
    }
    for (const { source, route, delaySeconds, receiptIds } of groups.values())
      await enqueueWork(databaseEnv, source, receiptIds, delaySeconds, { route });
    sent += page.length;
    if (page.length < PAGE_ROWS) return sent;
    const last = page.at(-1)!;
    after = [last.receiptId, last.route];
  }
}

/** Every pending or processing receipt (and further delivery), in every receipt database, back on the queue; then every shard swept. */
export async function requeueUnfinished(env: Env, now: number): Promise<number> {
  let sent = 0;
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const db = database(databaseEnv);
    let after = "";
    for (;;) {
      const page = await db
        .select({
          receiptId: receipts.receiptId,
          source: receipts.source,
          status: receipts.status,
          nextAttemptAt: receipts.nextAttemptAt,
          leaseUntil: receipts.leaseUntil,
        })
        .from(receipts)
        .where(and(gt(receipts.receiptId, after), inArray(receipts.status, ["pending", "processing"])))
        .orderBy(asc(receipts.receiptId))
        .limit(PAGE_ROWS);
      const byDelay = new Map<number, typeof page>();
      for (const row of page) {
        const delaySeconds = remainingDelaySeconds(row, now);
        byDelay.set(delaySeconds, [...(byDelay.get(delaySeconds) ?? []), row]);
      }
      for (const [delaySeconds, rows] of byDelay) await enqueueReceipts(databaseEnv, rows, delaySeconds);
      sent += page.length;
      if (page.length < PAGE_ROWS) break;
      after = page.at(-1)!.receiptId;
    }
    sent += await requeueUnfinishedDeliveries(databaseEnv, now);
  }
  let claimsRelayed = 0;
  try {
    claimsRelayed = (await sweepShards(env, [...loadSources(env).values()], now)).claimsRelayed;
  } catch (error) {
    // A broken SOURCES table: the receipts above are back on the queue all the same.
    logError("local.restart_sweep_failed", error);
  }
  logEvent("local.requeued_after_restart", { receipts: sent, claimsRelayed });
  return sent;
}
