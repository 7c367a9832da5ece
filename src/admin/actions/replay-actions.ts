import { apiError } from "../../lib/errors";
import { logEvent } from "../../lib/log";
import {
  oldestDeadDeliveries,
  type ReplayDelivery,
  replayDeadDeliveries,
  replayDelivery,
} from "../../replay/replay-delivery";
import {
  DEFAULT_REPLAY_LIMIT,
  type DeadReceiptFilter,
  oldestDeadMatching,
  ReplayFilterError,
  type ReplayMany,
  type ReplayOne,
  type ReplayRequester,
  replayDeadReceipts,
  replayReceipt,
} from "../../replay/replay-receipts";
import { receiptDatabaseEnvs } from "../../sources/databases";
import { loadSources } from "../../sources/registry";
import { groupByDatabase } from "../receipts/receipt-databases";

/**
 * The admin surface's door to replay. Replay itself — resetting a receipt and putting it back on the queue —
 * is src/replay's, one database at a time; this finds each receipt's database (ids in whichever holds them, a
 * filter in every one), adapts the answers to one report shape for the API and the dashboard, and logs who asked
 * for how much (counts only).
 */

export interface ReplayReport {
  receiptId: string;
  /** "replayed", or why not: "not_found", "in_flight" (pending or processing), "payload_expired", "dismissed" (restore it first). */
  outcome: ReplayOne["kind"];
}

export interface BulkReplayReport {
  replayed: number;
  /** More receipts matched the filter than one call replays: call again with `after: cursor`. */
  more: boolean;
  /** Where this call stopped: send it back as `after` so the next call goes on from there (null for replay by id). */
  cursor: string | null;
  results: ReplayReport[];
}

export const MAX_REPLAY_IDS = 100;

export async function replayByIds(
  env: Env,
  receiptIds: readonly string[],
  requestedBy: ReplayRequester,
): Promise<BulkReplayReport> {
  const databaseOf = new Map(
    (await groupByDatabase(env, receiptIds)).flatMap((group) =>
      group.receiptIds.map((receiptId) => [receiptId, group.env] as const),
    ),
  );
  const results: ReplayReport[] = [];
  // One at a time: each is a read, a guarded reset and an enqueue, and a bulk request must not burst D1.
  for (const receiptId of receiptIds) {
    const outcome = await replayReceipt(databaseOf.get(receiptId) ?? env, receiptId, Date.now(), requestedBy);
    results.push({ receiptId, outcome: outcome.kind });
  }
  const replayed = results.filter((result) => result.outcome === "replayed").length;
  // One receipt (POST /admin/api/receipts/<id>/replay) names it, so its replay is found by its id in the logs.
  const [only] = receiptIds.length === 1 ? results : [];
  logEvent("admin.replay", {
    mode: "ids",
    receipt: only?.receiptId,
    outcome: only?.outcome,
    requested: receiptIds.length,
    replayed,
  });
  return { replayed, more: false, cursor: null, results };
}

/** One route's delivery of one receipt, in whichever database holds it (src/replay/replay-delivery.ts). */
export async function replayRoute(
  env: Env,
  receiptId: string,
  route: string,
  requestedBy: ReplayRequester,
): Promise<ReplayDelivery> {
  const [group] = await groupByDatabase(env, [receiptId]);
  const outcome = await replayDelivery(group?.env ?? env, receiptId, route, Date.now(), requestedBy);
  logEvent("admin.replay", {
    mode: "route",
    receipt: receiptId,
    route,
    outcome: outcome.kind,
    replayed: outcome.kind === "replayed" ? 1 : 0,
  });
  return outcome;
}

/**
 * @param route only that route's dead letters of `filter.source` (docs/routing.md, "Fan-out"): the receipts whose own
 * delivery is the route's, and its further deliveries; no other route runs again. Refused (404) unless the source has
 * that route.
 */
export async function replayDeadMatching(
  env: Env,
  filter: DeadReceiptFilter,
  requestedBy: ReplayRequester,
  route?: string,
): Promise<BulkReplayReport> {
  let outcome;
  try {
    outcome =
      route === undefined
        ? await replayDeadAcrossDatabases(env, filter, requestedBy)
        : await replayRouteDeadLetters(env, { ...filter, route: routeScope(env, filter.source, route) }, requestedBy);
  } catch (error) {
    if (error instanceof ReplayFilterError) throw apiError(400, "invalid_body", `Replay filter: ${error.message}.`);
    throw error;
  }
  logEvent("admin.replay", {
    mode: "filter",
    source: filter.source,
    route,
    replayed: outcome.replayed,
    more: outcome.more,
  });
  return {
    replayed: outcome.replayed,
    more: outcome.more,
    cursor: outcome.cursor,
    results: outcome.receiptIds.map((receiptId) => ({ receiptId, outcome: "replayed" as const })),
  };
}

/**
 * The filter's dead letters in every receipt database (a source that moved left its older dead letters in the
 * database it moved from), oldest first, up to `limit` in all. Across several databases the oldest `limit` ids of
 * them all draw one boundary, and each database replays its own up to it, so one cursor continues every database
 * from the same place and none is skipped.
 */
async function replayDeadAcrossDatabases(
  env: Env,
  filter: DeadReceiptFilter,
  requestedBy: ReplayRequester,
): Promise<ReplayMany> {
  const databases = receiptDatabaseEnvs(env);
  if (databases.length === 1) return replayDeadReceipts(databases[0]!.env, filter, Date.now(), requestedBy);
  const limit = filter.limit ?? DEFAULT_REPLAY_LIMIT;
  const oldest = (await Promise.all(databases.map(({ env: databaseEnv }) => oldestDeadMatching(databaseEnv, filter))))
    .flat()
    .sort()
    .slice(0, limit);
  const through = oldest.at(-1);
  if (through === undefined) return { replayed: 0, receiptIds: [], more: false, cursor: filter.after ?? null };
  const total: ReplayMany = { replayed: 0, receiptIds: [], more: false, cursor: through };
  for (const { env: databaseEnv } of databases) {
    const page = await replayDeadReceipts(databaseEnv, { ...filter, through, limit }, Date.now(), requestedBy);
    total.replayed += page.replayed;
    total.receiptIds.push(...page.receiptIds);
    total.more ||= page.more;
  }
  total.receiptIds.sort();
  return total;
}

/** The route a bulk replay is scoped to, once its source is known to have it. */
function routeScope(env: Env, source: string | undefined, route: string): { name: string } {
  if (source === undefined)
    throw apiError(400, "invalid_body", 'A replay by "route" needs the "source" it belongs to.');
  const config = loadSources(env).get(source);
  const names = config?.routes.map(({ rules }) => rules.name) ?? [];
  if (!names.includes(route))
    throw apiError(
      404,
      "route_not_found",
      config
        ? `Source ${JSON.stringify(source)} has no route ${JSON.stringify(route)} (its routes: ${names.join(", ")}).`
        : `No valid source ${JSON.stringify(source)} is configured, so it has no route ${JSON.stringify(route)}.`,
    );
  return { name: route };
}

/**
 * One route's dead letters, in every receipt database: the receipts whose own delivery is the route's, and the
 * route's further deliveries, walked as one order of receipt ids. The oldest `limit` of both kinds draw one boundary,
 * as across databases, so one cursor continues both.
 */
async function replayRouteDeadLetters(
  env: Env,
  filter: DeadReceiptFilter & { route: { name: string } },
  requestedBy: ReplayRequester,
): Promise<ReplayMany> {
  const databases = receiptDatabaseEnvs(env);
  const limit = filter.limit ?? DEFAULT_REPLAY_LIMIT;
  const found = await Promise.all(
    databases.flatMap(({ env: databaseEnv }) => [
      oldestDeadMatching(databaseEnv, filter),
      oldestDeadDeliveries(databaseEnv, filter),
    ]),
  );
  const through = [...new Set(found.flat())].sort().slice(0, limit).at(-1);
  if (through === undefined) return { replayed: 0, receiptIds: [], more: false, cursor: filter.after ?? null };
  const total: ReplayMany = { replayed: 0, receiptIds: [], more: false, cursor: through };
  const page = { ...filter, through, limit };
  for (const { env: databaseEnv } of databases) {
    for (const replayed of [
      await replayDeadReceipts(databaseEnv, page, Date.now(), requestedBy),
      await replayDeadDeliveries(databaseEnv, page),
    ]) {
      total.replayed += replayed.replayed;
      total.receiptIds.push(...replayed.receiptIds);
      total.more ||= replayed.more;
    }
  }
  total.receiptIds.sort();
  return total;
}
