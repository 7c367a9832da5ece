import { type Context, Hono } from "hono";
import { apiError } from "../../lib/errors";
import { recordAllowed, requireRole } from "../access/require-role";
import { type DeadLetterAction, MAX_DISMISS_IDS, moveDeadLetters, moveRouteDeadLetters } from "../actions/dismiss";
import { replayByIds, replayDeadMatching } from "../actions/replay-actions";
import { parseBulkReplayRequest } from "../actions/replay-request";
import type { OperatorAction } from "../audit-log/record";
import { filterTarget, receiptsTarget } from "../audit-log/targets";
import type { AdminEnv } from "../guards/auth";
import { DEAD_DELIVERIES_CURSOR, deadDeliveriesPage, parseDeadDeliveriesCursor } from "../receipts/dead-deliveries";
import {
  describeUnknown,
  isReceiptId,
  parseReceiptFilter,
  RECEIPT_FILTER_PARAMETERS,
  rejectUnknownParameters,
} from "../receipts/filters";
import { searchReceipts } from "../receipts/lists";

/**
 * /admin/api/dead — dead letters (docs/operating.md):
 *   GET  /admin/api/dead                      dead receipts and further routes' dead deliveries, a filter over them;
 *   POST /admin/api/dead/replay               bulk replay, by ids or by a filter;
 *   POST /admin/api/dead/dismiss|restore      take dead letters out of the dead count, or bring them back.
 * Mounted behind the sign-in by ./index.ts, which refuses query parameters on the POSTs; replay, dismiss and
 * restore need the operator role, and each is written to the audit log.
 */
export const deadLettersApi = new Hono<AdminEnv>();

deadLettersApi.get("/", async (c) => {
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

/**
 * Bulk replay of dead letters: either {"receiptIds": [...]} (at most 100) or a filter over dead receipts with an
 * explicit scope, {"source"} or {"all": true}, plus "route" (with a source: that route's dead letters alone), "type",
 * "since", "until", "limit" — since inclusive, until exclusive, at most 1000 per call; repeat while the answer says
 * "more": true. Unknown keys are refused.
 */
deadLettersApi.post("/replay", requireRole("operator", bulkReplayAction), async (c) => {
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

deadLettersApi.post("/:action{dismiss|restore}", requireRole("operator", deadLetterAction), async (c) => {
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
