import { and, asc, eq, gt, gte, isNull, lt, type SQL, sql } from "drizzle-orm";
import { batchByName } from "../db/batch";
import { type Database, database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { deliveries, receipts, replayJobs } from "../db/schema";
import { enqueueWork } from "../relay/enqueue";
import { loadSources } from "../sources/registry";
import { keepOwnAttempt } from "./kept-attempt";
import { bodyStillKept } from "./replay-body";
import { resetColumns as deliveryResetColumns } from "./replay-delivery";
import {
  checkJobFilter,
  chooseReplays,
  type PageDelivery,
  type PageReceipt,
  type ReplayChoice,
  type ReplayJobFilter,
  takeChoices,
} from "./replay-filter";
import {
  BODY_RETAINED,
  logReplays,
  type ReplayRequester,
  resetColumns as receiptResetColumns,
} from "./replay-receipts";

/**
 * One step of a bulk replay job in one receipt database (docs/operating.md, "Bulk replay by filter"): the next page
 * of the source's receipts after the job's cursor, the deliveries of it the filter chooses (replay-filter.ts) reset
 * or written, and the cursor moved past them — all in one D1 batch, each statement guarded by the cursor the step
 * read, so a second runner of the same step (two cron runs, a resume after a crash) changes nothing and no delivery
 * is replayed twice. The replayed deliveries go on the work queue after the batch, where their route's gate paces
 * them as any delivery; a crash before that leaves them pending and due, and the cron's re-drive sends them.
 */

/** Receipts a step reads: its counted work. */
export const JOB_PAGE = 200;

export type JobRow = typeof replayJobs.$inferSelect;

export interface PageRead {
  page: (PageReceipt & {
    source: string;
    bodyRetained: number;
    bodyLocation: string | null;
    orderingKey: string | null;
  })[];
  choices: ReplayChoice[];
}

/** The page after `cursor` and what the filter chooses of it: a step's read, and a dry run's. */
export async function readPage(env: Env, filter: ReplayJobFilter, cursor: string | null): Promise<PageRead> {
  const db = database(env);
  const page = await db
    .select({
      receiptId: receipts.receiptId,
      source: receipts.source,
      route: receipts.route,
      filteredRoutes: receipts.filteredRoutes,
      status: receipts.status,
      lastError: receipts.lastError,
      statusEnteredAt: receipts.statusEnteredAt,
      bodyRetained: sql<number>`${BODY_RETAINED}`,
      bodyLocation: receipts.bodyLocation,
      orderingKey: receipts.orderingKey,
    })
    .from(receipts)
    .where(
      and(
        eq(receipts.source, filter.source),
        cursor === null ? undefined : gt(receipts.receiptId, cursor),
        filter.eventType === undefined ? undefined : eq(receipts.eventType, filter.eventType),
        filter.since === undefined ? undefined : gte(receipts.receivedAt, filter.since),
        filter.until === undefined ? undefined : lt(receipts.receivedAt, filter.until),
      ),
    )
    .orderBy(asc(receipts.receiptId))
    .limit(JOB_PAGE);
  const further: PageDelivery[] =
    page.length === 0
      ? []
      : await db
          .select({
            receiptId: deliveries.receiptId,
            route: deliveries.route,
            status: deliveries.status,
            lastError: deliveries.lastError,
            statusEnteredAt: deliveries.statusEnteredAt,
          })
          .from(deliveries)
          .where(
            and(
              inJsonList(
                deliveries.receiptId,
                page.map((row) => row.receiptId),
              ),
              filter.route === undefined ? undefined : eq(deliveries.route, filter.route),
            ),
          );
  const firstRoute = loadSources(env).get(filter.source)?.routes[0]?.rules.name ?? null;
  return { page, choices: chooseReplays(filter, page, further, firstRoute) };
}

export interface StepResult {
  /** False when another runner moved the job first: this step changed nothing. */
  moved: boolean;
  done: boolean;
  replayed: number;
}

/**
 * Runs one step of `job` (a running row of `env`'s database). `limit` caps the deliveries it replays (a recovery
 * ramps up: route-recovery.ts); the cursor stops after the last receipt whose deliveries were all taken.
 */
export async function stepJob(env: Env, job: JobRow, now: number, limit = JOB_PAGE): Promise<StepResult> {
  const filter = checkJobFilter(JSON.parse(job.filter));
  const { page, choices } = await readPage(env, filter, job.cursor);
  const kept = new Set(page.filter((row) => bodyStillKept(env, row, now)).map((row) => row.receiptId));
  const { taken, reached } = takeChoices(
    choices.filter((choice) => kept.has(choice.receiptId)),
    page,
    Math.max(1, limit),
  );
  const expired = choices.filter(
    (choice) => !kept.has(choice.receiptId) && (reached === null || choice.receiptId <= reached),
  ).length;
  const cursor = reached ?? job.cursor;
  const done = page.length < JOB_PAGE && cursor === (page.at(-1)?.receiptId ?? job.cursor);
  const db = database(env);
  // Every write of the step holds only while the job's row is still where this step read it.
  const unmoved = sql`EXISTS (SELECT 1 FROM replay_jobs WHERE job_key = ${job.jobKey} AND state = 'running' AND cursor IS ${job.cursor})`;
  const ownIds = taken.filter((choice) => choice.kind === "receipt").map((choice) => choice.receiptId);
  const resetting = and(
    inJsonList(receipts.receiptId, ownIds),
    eq(receipts.status, filter.status),
    BODY_RETAINED,
    unmoved,
  );
  const requestedBy: ReplayRequester | null = job.origin === "recovery" ? null : job.origin;
  const byRoute = new Map<string, string[]>();
  for (const choice of taken)
    if (choice.kind === "delivery") byRoute.set(choice.route, [...(byRoute.get(choice.route) ?? []), choice.receiptId]);
  const routes = [...byRoute];
  const added = taken.filter((choice) => choice.kind === "new-delivery");
  const configured = loadSources(env).get(filter.source);
  const orderingOf = new Map(page.map((row) => [row.receiptId, row.orderingKey]));
  const statements = {
    logged: logReplays(db, resetting, now, requestedBy),
    kept: keepOwnAttempt(db, resetting),
    reset: db
      .update(receipts)
      .set(receiptResetColumns(now))
      .where(resetting)
      .returning({ receiptId: receipts.receiptId }),
    ...Object.fromEntries(
      routes.map(([route, ids], index) => [`route${index}`, resetDeliveries(db, route, ids, filter, now, unmoved)]),
    ),
    ...Object.fromEntries(
      added.map((choice, index) => {
        const route = configured?.routes.find(({ rules }) => rules.name === choice.route);
        // An ordered route keeps the event's ordering value, as the fan-out writes it (src/consumers/deliveries/fan-out.ts).
        const orderingKey = route?.rules.ordering ? (orderingOf.get(choice.receiptId) ?? null) : null;
        return [`added${index}`, addDelivery(db, choice.receiptId, choice.route, orderingKey, now, unmoved)];
      }),
    ),
    moved: db
      .update(replayJobs)
      .set({
        cursor,
        scanned: sql`${replayJobs.scanned} + ${page.filter((row) => cursor !== null && row.receiptId <= cursor).length}`,
        state: done ? "done" : "running",
        finishedAt: done ? now : null,
        updatedAt: now,
      })
      .where(
        and(
          eq(replayJobs.jobKey, job.jobKey),
          eq(replayJobs.state, "running"),
          sql`${replayJobs.cursor} IS ${job.cursor}`,
        ),
      )
      .returning({ jobKey: replayJobs.jobKey }),
  };
  const results = (await batchByName(db, statements)) as Record<string, unknown>;
  if ((results.moved as unknown[]).length === 0) return { moved: false, done: false, replayed: 0 };
  const ownReset = (results.reset as { receiptId: string }[]).map((row) => row.receiptId).sort();
  const perRoute = routes.map(([route], index) => ({
    route,
    ids: (results[`route${index}`] as { receiptId: string }[]).map((row) => row.receiptId).sort(),
  }));
  const addedIds = added
    .filter((_, index) => (results[`added${index}`] as unknown[]).length > 0)
    .map((choice) => choice.receiptId);
  if (addedIds.length > 0) perRoute.push({ route: filter.route!, ids: addedIds });
  const replayed = ownReset.length + perRoute.reduce((sum, { ids }) => sum + ids.length, 0);
  // Counts only: a crash before this line leaves them short, never a delivery replayed twice.
  await db
    .update(replayJobs)
    .set({ replayed: sql`${replayJobs.replayed} + ${replayed}`, expired: sql`${replayJobs.expired} + ${expired}` })
    .where(eq(replayJobs.jobKey, job.jobKey));
  await enqueueWork(env, filter.source, ownReset);
  for (const { route, ids } of perRoute) await enqueueWork(env, filter.source, ids, 0, { route });
  return { moved: true, done, replayed };
}

function resetDeliveries(
  db: Database,
  route: string,
  ids: string[],
  filter: ReplayJobFilter,
  now: number,
  unmoved: SQL,
) {
  return db
    .update(deliveries)
    .set(deliveryResetColumns(now))
    .where(
      and(
        inJsonList(deliveries.receiptId, ids),
        eq(deliveries.route, route),
        eq(deliveries.status, filter.status),
        isNull(deliveries.committedAt),
        unmoved,
      ),
    )
    .returning({ receiptId: deliveries.receiptId });
}

/**
 * A delivery to a route the receipt never had one for: pending and due at once, as a replayed one is. Every column of
 * `deliveries`, in the table's order (drizzle's insert … select of raw SQL names them all).
 */
function addDelivery(
  db: Database,
  receiptId: string,
  route: string,
  orderingKey: string | null,
  now: number,
  unmoved: SQL,
) {
  return db
    .insert(deliveries)
    .select(
      sql`SELECT ${receiptId}, ${route}, 'pending', 0, 0, ${now}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, ${now}, ${orderingKey}, NULL WHERE ${unmoved}`,
    )
    .onConflictDoNothing()
    .returning({ receiptId: deliveries.receiptId });
}
