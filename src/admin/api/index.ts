import { type Context, Hono, type MiddlewareHandler } from "hono";
import { database } from "../../db/client";
import { apiError } from "../../lib/errors";
import { recordAllowed, requireRole } from "../access/require-role";
import { signInApi } from "../access/sign-in";
import { type DeadLetterAction, MAX_DISMISS_IDS, moveDeadLetters, moveRouteDeadLetters } from "../actions/dismiss";
import { replayByIds, replayDeadMatching, replayRoute } from "../actions/replay-actions";
import type { OperatorAction } from "../audit-log/record";
import { filterTarget, receiptsTarget } from "../audit-log/targets";
import type { AdminEnv } from "../guards/auth";
import { listAlerts } from "../health/alerts";
import { DEAD_DELIVERIES_CURSOR, deadDeliveriesPage, parseDeadDeliveriesCursor } from "../receipts/dead-deliveries";
import {
  describeUnknown,
  isReceiptId,
  parseCursor,
  parseLimit,
  parseReceiptFilter,
  parseWindow,
  RECEIPT_FILTER_PARAMETERS,
  rejectUnknownParameters,
} from "../receipts/filters";
import { listQuarantine, receiptChanges, searchReceipts } from "../receipts/lists";
import { receiptByEventKey } from "../receipts/receipt-by-key";
import { CHANGE_PARAMETERS, parseChangesQuery } from "../receipts/receipt-changes";
import { inFirstDatabase } from "../receipts/receipt-databases";
import { receiptDetail } from "../receipts/receipt-detail";
import { receiptNotFound } from "../receipts/receipt-not-found";
import { deliveryMetricsFor } from "../stats/analytics-query";

async function replayRouteReport(
  env: Env,
  receiptId: string,
  route: string,
): Promise<{ receiptId: string; route: string; outcome: string }> {
  return { receiptId, route, outcome: (await replayRoute(env, receiptId, route, "api")).kind };
}

import { sourcesHealth } from "../../sources/registry";
import { sourcesMissingSecrets, sourcesWithExpiredSecrets } from "../../sources/secrets-set";
import { parseBulkReplayRequest } from "../actions/replay-request";
import { AUDIT_LOG_PARAMETERS } from "../audit-log/list";
import { storageSizes } from "../health/storage-sizes";
import { systemHealth } from "../health/system-health";
import { collectMeters } from "../stats/meters";
import { sourceStats } from "../stats/stats";
import { auditLogApi } from "./audit-log";
import { AUDIT_ROWS_PARAMETERS, auditRowsApi } from "./audit-rows";
import { issuesApi } from "./issues";
import { keptSecretsApi } from "./kept-secrets";
import { listenApi } from "./listen";
import { metricsApi } from "./metrics";
import { replayJobsApi } from "./replay-jobs";
import { routeControlApi } from "./route-control";
import { routeTestApi } from "./route-test";
import { sourceDetailApi } from "./source-detail";

/**
 * /admin/api — JSON for operators and scripts, behind the ADMIN_TOKEN bearer token. Read endpoints never
 * write; the replay, dismiss and kept-secret endpoints are the only ones that change anything.
 */
export const adminApi = new Hono<AdminEnv>();

adminApi.use("*", signInApi);

/** The query parameters a route reads; any other is a typo, answered 400 naming it instead of being ignored. */
function accepts(...allowed: readonly string[]): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    rejectUnknownParameters(c.req.query(), allowed);
    await next();
  };
}

/** Paged search; with `changedSince`, instead what changed since a cursor, for a live tail (../receipts/receipt-changes.ts). */
adminApi.get("/receipts", accepts(...RECEIPT_FILTER_PARAMETERS, ...CHANGE_PARAMETERS), async (c) => {
  const query = c.req.query();
  if (query.changedSince !== undefined) return c.json(await receiptChanges(c.env, parseChangesQuery(query)));
  if (query.window !== undefined)
    throw apiError(400, "invalid_query", 'Query parameter "window" only goes with changedSince.');
  return c.json(await searchReceipts(c.env, parseReceiptFilter(query)));
});

adminApi.get("/receipts/:receiptId", accepts(), async (c) => {
  const receiptId = c.req.param("receiptId");
  if (!isReceiptId(receiptId)) throw apiError(400, "invalid_receipt_id", "A receipt id is a 26-character ULID.");
  const detail = await inFirstDatabase(c.env, (databaseEnv) => receiptDetail(database(databaseEnv), receiptId, c.env));
  if (!detail) throw await receiptNotFound(c.env, receiptId);
  return c.json(detail);
});

/**
 * The same detail, looked up by what the provider calls the event (its dedupe key, scoped by source): through the
 * key index of each database, the source's own first, or a partitioned source's claim shard (../receipts/receipt-by-key.ts).
 */
adminApi.get("/sources/:source/events/:eventKey", accepts(), async (c) =>
  c.json(await receiptByEventKey(c.env, c.req.param("source"), c.req.param("eventKey"))),
);

adminApi.get("/dead", async (c) => {
  const query = c.req.query();
  if (query.status !== undefined)
    throw apiError(
      400,
      "invalid_query",
      'Dead letters are status "dead"; use /admin/api/receipts to filter by status.',
    );
  rejectUnknownParameters(query, [...RECEIPT_FILTER_PARAMETERS, DEAD_DELIVERIES_CURSOR]);
  const { [DEAD_DELIVERIES_CURSOR]: deliveriesBefore, ...receiptQuery } = query;
  const filter = parseReceiptFilter({ ...receiptQuery, status: "dead" });
  const deliveriesCursor = parseDeadDeliveriesCursor(deliveriesBefore);
  // Receipts whose own delivery is dead, and further routes' dead deliveries, each list with its own cursor
  // (../receipts/dead-deliveries.ts).
  const [deadReceipts, deadDeliveries] = await Promise.all([
    searchReceipts(c.env, filter),
    deadDeliveriesPage(c.env, filter, deliveriesCursor),
  ]);
  return c.json({ ...deadReceipts, ...deadDeliveries });
});

adminApi.post("/receipts/:receiptId/replay", accepts("route"), requireRole("operator", "replay"), async (c) => {
  const receiptId = c.req.param("receiptId");
  if (!isReceiptId(receiptId)) throw apiError(400, "invalid_receipt_id", "A receipt id is a 26-character ULID.");
  const route = c.req.query("route");
  // ?route=<name>: that route's delivery alone (docs/routing.md, "Fan-out").
  const report =
    route !== undefined
      ? await replayRouteReport(c.env, receiptId, route)
      : (await replayByIds(c.env, [receiptId], "api")).results[0];
  await recordAllowed(c, "replay", receiptsTarget([receiptId], route), report?.outcome === "replayed" ? 1 : 0);
  switch (report?.outcome) {
    case "replayed":
      return c.json(report, 202);
    case "not_found":
      throw apiError(404, "receipt_not_found", "No receipt has this id.");
    case "in_flight":
      throw apiError(
        409,
        "receipt_in_flight",
        "The receipt (or that route's delivery) is pending or processing already; nothing was replayed.",
      );
    case "no_such_route":
      throw apiError(
        404,
        "delivery_not_found",
        "The receipt has no delivery to that route (not a matched route of it).",
      );
    case "dismissed":
      throw apiError(
        409,
        "dismissed",
        "The dead letter (or that route's delivery) is dismissed: restore it (POST /admin/api/dead/restore) to replay it.",
      );
    case "delivered":
      throw apiError(
        409,
        "delivery_committed",
        "That route's delivery already committed its outcome; a replay would apply nothing.",
      );
    default:
      throw apiError(
        409,
        "payload_expired",
        "The receipt's body is past payload retention; there is nothing left to replay.",
      );
  }
});

/**
 * Bulk replay of dead letters: either {"receiptIds": [...]} (at most 100) or a filter over dead receipts with an
 * explicit scope, {"source"} or {"all": true}, plus "route" (with a source: that route's dead letters alone), "type",
 * "since", "until", "limit" — since inclusive, until exclusive, at most 1000 per call; repeat while the answer says
 * "more": true. Unknown keys are refused.
 */
adminApi.post("/dead/replay", accepts(), requireRole("operator", bulkReplayAction), async (c) => {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw apiError(
      400,
      "invalid_body",
      'Send a JSON object: {"receiptIds": [...]} or {"source": "...", "since", "until", "type", "limit"}.',
    );
  }
  const request = parseBulkReplayRequest(body);
  const report =
    request.kind === "ids"
      ? await replayByIds(c.env, request.receiptIds, "api")
      : await replayDeadMatching(c.env, request.filter, "api", request.route);
  await recordAllowed(
    c,
    request.kind === "ids" ? "replay" : "bulk-replay",
    request.kind === "ids" ? receiptsTarget(request.receiptIds) : filterTarget(request.filter, request.route),
    report.replayed,
  );
  return c.json(report);
});

/** By ids, a replay; by a filter, a bulk replay: what a refusal is logged as, read from the body as sent. */
async function bulkReplayAction(c: Context<AdminEnv>): Promise<OperatorAction> {
  const body: unknown = await c.req.json().catch(() => null);
  return body && typeof body === "object" && "receiptIds" in body ? "replay" : "bulk-replay";
}

/**
 * Dismiss dead letters once their cause is fixed (or they are not worth replaying): {"receiptIds": [...]}, at
 * most 100. They leave the dead count, so the source's health stops showing red; restore brings them back. With
 * "route": that route's delivery of each receipt (its own, or a further one), e.g. a dead further delivery that
 * holds its ordered route.
 */
const deadLetterAction = (c: Context<AdminEnv>) => c.req.param("action") as DeadLetterAction;

adminApi.post("/dead/:action{dismiss|restore}", accepts(), requireRole("operator", deadLetterAction), async (c) => {
  const action = deadLetterAction(c);
  const { receiptIds, route } = await dismissBody(c.req.raw);
  const report =
    route === undefined
      ? await moveDeadLetters(c.env, action, receiptIds)
      : await moveRouteDeadLetters(c.env, action, receiptIds, route);
  await recordAllowed(c, action, receiptsTarget(receiptIds, route), report.changed.length);
  return c.json(report);
});

async function dismissBody(request: Request): Promise<{ receiptIds: string[]; route?: string }> {
  const usage = `Send a JSON object {"receiptIds": [...]} with 1 to ${MAX_DISMISS_IDS} receipt ids, and optionally "route": "<name>".`;
  let body: unknown;
  try {
    body = await request.json();
  } catch {
    throw apiError(400, "invalid_body", usage);
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) throw apiError(400, "invalid_body", usage);
  const unknown = Object.keys(body).filter((key) => key !== "receiptIds" && key !== "route");
  if (unknown.length > 0) throw apiError(400, "unknown_key", describeUnknown("key", unknown, ["receiptIds", "route"]));
  const { receiptIds: ids, route } = body as { receiptIds?: unknown; route?: unknown };
  if (route !== undefined && (typeof route !== "string" || route.length === 0))
    throw apiError(400, "invalid_body", `"route" must be a route's name. ${usage}`);
  if (
    !Array.isArray(ids) ||
    ids.length === 0 ||
    ids.length > MAX_DISMISS_IDS ||
    !ids.every((id) => typeof id === "string" && isReceiptId(id))
  ) {
    throw apiError(400, "invalid_body", usage);
  }
  return { receiptIds: ids as string[], ...(route === undefined ? {} : { route }) };
}

adminApi.get("/quarantine", accepts("source", "before", "limit"), async (c) => {
  const query = c.req.query();
  return c.json(
    await listQuarantine(c.env, {
      source: query.source || undefined,
      before: parseCursor(query),
      limit: parseLimit(query),
    }),
  );
});

adminApi.get("/alerts", accepts("source", "state", "limit"), async (c) => {
  const query = c.req.query();
  const state = query.state;
  if (state !== undefined && state !== "open" && state !== "resolved")
    throw apiError(400, "invalid_query", 'Query parameter "state" must be open or resolved.');
  return c.json({
    alerts: await listAlerts(database(c.env), { source: query.source || undefined, state, limit: parseLimit(query) }),
  });
});

/** Which sources accept deliveries and which are broken (answering 503), with every problem of each table. */
adminApi.get("/sources", accepts(), (c) => {
  const now = Date.now();
  return c.json({
    ...sourcesHealth(c.env),
    missingSecrets: Object.fromEntries(sourcesMissingSecrets(c.env, now)),
    expiredSecrets: Object.fromEntries(sourcesWithExpiredSecrets(c.env, now)),
  });
});

adminApi.get("/stats", accepts("source", "window"), async (c) => {
  const query = c.req.query();
  const onlySource = query.source || undefined;
  const windowMs = parseWindow(query);
  const { readout, note } = await deliveryMetricsFor(c.env, windowMs, onlySource);
  const report = await sourceStats(c.env, windowMs, { onlySource, metrics: readout?.totals ?? null });
  if (note) report.notes.analyticsEngine = note;
  if (onlySource !== undefined && report.sources.length === 0) {
    throw apiError(404, "unknown_source", "No configured or recorded source has this name.");
  }
  // Every receipt database's size always; shard sizes for a single configured source only (one RPC per shard, like duplicates).
  const shardSources = onlySource !== undefined && report.sources[0]?.configured ? [onlySource] : null;
  return c.json({ ...report, storage: await storageSizes(c.env, shardSources) });
});

/** GET /health's reasons with their details: the system monitor's incidents, config problems, storage sizes. */
adminApi.get("/health", accepts("source"), async (c) =>
  c.json(await systemHealth(c.env, c.req.query("source") || undefined)),
);

/**
 * The runtime's own meters (D1 rows and calls, Durable Object rows and requests, alarm writes, queue operations)
 * as counted since each isolate started; `npm run bench -- --only meters` reads this before and after a run.
 */
adminApi.get("/meters", accepts(), async (c) => c.json(await collectMeters(c.env)));

/** OpenMetrics text for Prometheus or Grafana Agent (./metrics.ts). */
adminApi.use("/metrics", accepts("window"));
adminApi.route("/metrics", metricsApi);

/** Kept handshake secrets (Asana, Notion): list, approve, revoke (./kept-secrets.ts). */
adminApi.use("/sources/:source/kept-secrets/*", accepts());
adminApi.use("/sources/:source/kept-secrets", accepts());
adminApi.route("/sources", keptSecretsApi);
/** A route's delivery control: its gate's state, pause and resume (./route-control.ts). */
adminApi.use("/sources/:source/routes/*", accepts());
adminApi.route("/sources", routeControlApi);
/** One source and its verification health (./source-detail.ts). */
adminApi.use("/sources/:source", accepts("window"));
adminApi.route("/sources", sourceDetailApi);
/** A source's stored events through its routes, now's or a draft's, without sending anything (./route-test.ts). */
adminApi.use("/sources/:source/route-test", accepts());
adminApi.route("/sources", routeTestApi);

/** Issues: list, acknowledge, resolve (./issues.ts). */
adminApi.use("/issues", accepts("all"));
adminApi.use("/issues/:issueKey/*", accepts());
adminApi.route("/issues", issuesApi);

/** The receipt tables' rows from every receipt database, for `npm run cli -- sql` (./audit-rows.ts). */
adminApi.use("/listen/*", accepts("route"));
adminApi.route("/listen", listenApi);

adminApi.use("/audit/*", accepts(...AUDIT_ROWS_PARAMETERS));
adminApi.route("/audit", auditRowsApi);

/** The operator audit log: who did what, allowed or refused (./audit-log.ts). */
adminApi.use("/audit-log", accepts(...AUDIT_LOG_PARAMETERS));
adminApi.route("/audit-log", auditLogApi);

/** Bulk replay jobs by filter (./replay-jobs.ts). */
adminApi.use("/replays/*", accepts());
adminApi.use("/replays", accepts());
adminApi.route("/replays", replayJobsApi);

/** After authentication, an unknown admin path is a JSON 404, not the dashboard's sign-in redirect. */
adminApi.all("*", () => {
  throw apiError(404, "not_found", "No such admin API route.");
});
