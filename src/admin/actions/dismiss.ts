import { and, eq, inArray } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";
import { apiError } from "../../lib/errors";
import type { SourceConfig } from "../../sources/config";
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
 * (a dismissed one no longer holds its ordered route's later deliveries, src/consumers/gate/delivery-order.ts).
 */

export const MAX_DISMISS_IDS = 100;

export interface DismissReport {
  /** Receipts whose status changed. */
  changed: string[];
  /** Asked for, but not in the state the action starts from (not dead, not dismissed, or unknown). */
  unchanged: string[];
  /** With a route: receipts whose own source has no route of that name, so nothing of them moved. */
  routeNotFound?: string[];
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
 * Dismisses, or restores, one route's delivery of each receipt. A receipt whose own source has no route of that name
 * is reported in `routeNotFound` (nothing of it moves); refused whole (404 route_not_found) when no configured source
 * has the route, or when none of the receipts found has it. A receipt with no dead (or dismissed) delivery to it is
 * reported unchanged.
 * @example
 *   await moveRouteDeadLetters(env, "dismiss", ["01JD…"], "ledger"); // { changed: ["01JD…"], unchanged: [], routeNotFound: [] }
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
  const groups = await Promise.all(
    (await groupByDatabase(env, receiptIds)).map(async (group) => {
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
      return { db, split: splitByRoute(sources, owners, route) };
    }),
  );
  const routeNotFound = groups.flatMap(({ split }) => split.routeNotFound).sort();
  if (routeNotFound.length > 0 && groups.every(({ split }) => split.own.length + split.further.length === 0))
    throw apiError(
      404,
      "route_not_found",
      noRouteMessage(
        sources,
        groups.flatMap(({ split }) => split.sourcesWithout),
        route,
      ),
    );
  const moved = await Promise.all(
    groups.map(async ({ db, split }) => {
      const [ownMoved, furtherMoved] = await Promise.all([
        moveRows(db, RECEIPT_ROWS, MOVES[action], split.own, now),
        moveRows(db, routeRows(route), MOVES[action], split.further, now),
      ]);
      return [...ownMoved, ...furtherMoved];
    }),
  );
  const notFound = new Set(routeNotFound);
  return {
    ...report(
      receiptIds.filter((receiptId) => !notFound.has(receiptId)),
      moved.flat(),
    ),
    routeNotFound,
  };
}

interface RouteOwner {
  receiptId: string;
  source: string;
  route: string | null;
  filteredRoutes: string | null;
}

/**
 * Which row holds each receipt's delivery to `route`: the receipt's own (`own`), a further delivery's (`further`), or
 * none, its source having no such route (`routeNotFound`). The receipt's own delivery is the route's when it carries
 * the route, or, never fanned out (a one-route source's every receipt), when the route is its source's first; a
 * fanned-out receipt with no route has none.
 */
function splitByRoute(
  sources: ReadonlyMap<string, SourceConfig>,
  owners: readonly RouteOwner[],
  route: string,
): { own: string[]; further: string[]; routeNotFound: string[]; sourcesWithout: string[] } {
  const split = {
    own: [] as string[],
    further: [] as string[],
    routeNotFound: [] as string[],
    sourcesWithout: [] as string[],
  };
  for (const owner of owners) {
    const routes = sources.get(owner.source)?.routes.map(({ rules }) => rules.name) ?? [];
    const ownRoute = owner.route ?? (owner.filteredRoutes === null ? (routes[0] ?? null) : null);
    if (!routes.includes(route)) {
      split.routeNotFound.push(owner.receiptId);
      split.sourcesWithout.push(owner.source);
    } else if (ownRoute === route) split.own.push(owner.receiptId);
    else split.further.push(owner.receiptId);
  }
  return split;
}

/** Why none of the receipts has the route: each of their sources, and the routes it has. */
function noRouteMessage(sources: ReadonlyMap<string, SourceConfig>, sourceNames: readonly string[], route: string) {
  return [...new Set(sourceNames)]
    .sort()
    .map((name) => {
      const config = sources.get(name);
      return config
        ? `Source ${JSON.stringify(name)} has no route ${JSON.stringify(route)} (its routes: ${config.routes.map(({ rules }) => rules.name).join(", ")}).`
        : `No valid source ${JSON.stringify(name)} is configured, so it has no route ${JSON.stringify(route)}.`;
    })
    .join(" ");
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
