import { and, eq, inArray } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";
import { apiError } from "../../lib/errors";
import { loadSources } from "../../sources/registry";
import { groupByDatabase } from "../receipts/receipt-databases";

/**
 * Dismissing a dead letter: the operator says "seen; the cause is fixed, or this one is not worth replaying".
 * The receipt becomes `dismissed` (kept, with its history and body until retention), which takes it out of the
 * dead count — so the source's health stops showing red and the cron resolves its dead-letter alert — without
 * applying anything. Restoring makes it `dead` again, and replayable. Only the status and the action's time move
 * (dismissed_at, restored_at: the latest of each, for the timeline); nothing else is touched, so a restored
 * receipt is processed exactly as the dead letter it was.
 *
 * With a route (docs/routing.md, "Fan-out"), the action is that route's delivery of each receipt: the receipt itself
 * when its own delivery is the route's, else the route's further delivery in `deliveries`, whose status alone moves
 * (a dismissed one no longer holds its ordered route's later deliveries, src/consumers/delivery-order.ts).
 */

export const MAX_DISMISS_IDS = 100;

export interface DismissReport {
  /** Receipts whose status changed. */
  changed: string[];
  /** Asked for, but not in the state the action starts from (not dead, not dismissed, or unknown). */
  unchanged: string[];
}

/** What each action moves a receipt from and to, and which of its times it stamps. */
const MOVES = {
  dismiss: { from: "dead", to: "dismissed", stamp: (now: number) => ({ dismissedAt: now }) },
  // The dismissal's time stays, so the timeline shows both.
  restore: { from: "dismissed", to: "dead", stamp: (now: number) => ({ restoredAt: now }) },
} as const;

export type DeadLetterAction = keyof typeof MOVES;

/**
 * Dismisses dead letters, or restores dismissed ones, by id wherever each receipt lives: one update per database
 * holding some of them (just `DB` when alone).
 * @example
 *   await moveDeadLetters(env, "dismiss", ["01JD…"]); // { changed: ["01JD…"], unchanged: [] }
 */
export async function moveDeadLetters(
  env: Env,
  action: DeadLetterAction,
  receiptIds: readonly string[],
  now = Date.now(),
): Promise<DismissReport> {
  const groups = await groupByDatabase(env, receiptIds);
  const moved = await Promise.all(
    groups.map((group) => moveRows(database(group.env), RECEIPT_ROWS, MOVES[action], group.receiptIds, now)),
  );
  return report(receiptIds, moved.flat());
}

/**
 * Dismisses, or restores, one route's delivery of each receipt. Refused (404 route_not_found) when no configured
 * source has a route of that name; a receipt with no delivery to it is reported unchanged.
 * @example
 *   await moveRouteDeadLetters(env, "dismiss", ["01JD…"], "ledger"); // { changed: ["01JD…"], unchanged: [] }
 */
export async function moveRouteDeadLetters(
  env: Env,
  action: DeadLetterAction,
  receiptIds: readonly string[],
  route: string,
  now = Date.now(),
): Promise<DismissReport> {
  const sources = loadSources(env);
  if (![...sources.values()].some((source) => source.routes.some(({ rules }) => rules.name === route)))
    throw apiError(404, "route_not_found", `No configured source has a route ${JSON.stringify(route)}.`);
  const firstRoute = (source: string) => sources.get(source)?.routes[0]?.rules.name ?? null;
  const groups = await groupByDatabase(env, receiptIds);
  const moved = await Promise.all(
    groups.map(async (group) => {
      const db = database(group.env);
      const owners = await db
        .select({
          receiptId: receipts.receiptId,
          source: receipts.source,
          route: receipts.route,
          filteredRoutes: receipts.filteredRoutes,
        })
        .from(receipts)
        .where(inArray(receipts.receiptId, group.receiptIds));
      // The receipt's own delivery is the route's when it carries the route, or, never fanned out (a one-route
      // source's every receipt), when the route is its source's first; a fanned-out receipt with no route has none.
      const ownRoute = (row: (typeof owners)[number]) =>
        row.route ?? (row.filteredRoutes === null ? firstRoute(row.source) : null);
      const own = owners.filter((row) => ownRoute(row) === route).map((row) => row.receiptId);
      const further = owners.map((row) => row.receiptId).filter((receiptId) => !own.includes(receiptId));
      const [ownMoved, furtherMoved] = await Promise.all([
        moveRows(db, RECEIPT_ROWS, MOVES[action], own, now),
        moveRows(db, routeRows(route), MOVES[action], further, now),
      ]);
      return [...ownMoved, ...furtherMoved];
    }),
  );
  return report(receiptIds, moved.flat());
}

/**
 * The rows an action moves: the receipts' own deliveries, or one route's further deliveries. A further delivery keeps
 * no dismissal time: its row has no such column, and the status is what the action is.
 */
const RECEIPT_ROWS = {
  table: receipts,
  receiptId: receipts.receiptId,
  status: receipts.status,
  stamped: true,
  only: undefined,
};
const routeRows = (route: string) => ({
  table: deliveries,
  receiptId: deliveries.receiptId,
  status: deliveries.status,
  stamped: false,
  only: eq(deliveries.route, route),
});

/** Moves each named row in the action's `from` status to its `to`: one guarded update, returning the rows it moved. */
async function moveRows(
  db: Database,
  rows: typeof RECEIPT_ROWS | ReturnType<typeof routeRows>,
  move: (typeof MOVES)[DeadLetterAction],
  receiptIds: readonly string[],
  now: number,
): Promise<{ receiptId: string }[]> {
  if (receiptIds.length === 0) return [];
  return db
    .update(rows.table)
    .set({ status: move.to, ...(rows.stamped ? move.stamp(now) : {}) })
    .where(and(inArray(rows.receiptId, [...receiptIds]), rows.only, eq(rows.status, move.from)))
    .returning({ receiptId: rows.receiptId });
}

function report(asked: readonly string[], rows: { receiptId: string }[]): DismissReport {
  const changed = new Set(rows.map((row) => row.receiptId));
  return { changed: [...changed].sort(), unchanged: [...new Set(asked)].filter((id) => !changed.has(id)) };
}
