import { Hono, type MiddlewareHandler } from "hono";
import { database } from "../../db/client";
import { apiError } from "../../lib/errors";
import { sourcesHealth } from "../../sources/registry";
import { sourcesMissingSecrets, sourcesWithExpiredSecrets } from "../../sources/secrets-set";
import { recordAllowed, requireRole } from "../access/require-role";
import { signInApi } from "../access/sign-in";
import { replayByIds, replayRoute } from "../actions/replay-actions";
import { AUDIT_LOG_PARAMETERS } from "../audit-log/list";
import { receiptsTarget } from "../audit-log/targets";
import type { AdminEnv } from "../guards/auth";
import { listAlerts } from "../health/alerts";
import { storageSizes } from "../health/storage-sizes";
import { systemHealth } from "../health/system-health";
import {
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
import { collectMeters } from "../stats/meters";
import { sourceStats } from "../stats/stats";
import { auditLogApi } from "./audit-log";
import { AUDIT_ROWS_PARAMETERS, auditRowsApi } from "./audit-rows";
import { deadLettersApi } from "./dead-letters";
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

/** One route's delivery of a receipt replayed (docs/routing.md, "Fan-out"), as the replay answer reports it. */
async function replayRouteReport(
  env: Env,
  receiptId: string,
  route: string,
): Promise<{ receiptId: string; route: string; outcome: string }> {
  return { receiptId, route, outcome: (await replayRoute(env, receiptId, route, "api")).kind };
}

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

/**
 * Dead letters: list, bulk replay, dismiss and restore (./dead-letters.ts). GET /dead checks its own query
 * parameters (a status among them is answered with where to filter by status); the changes take none.
 */
adminApi.post("/dead/:action{replay|dismiss|restore}", accepts());
adminApi.route("/dead", deadLettersApi);

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
