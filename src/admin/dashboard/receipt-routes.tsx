import { type Context, Hono } from "hono";
import { database } from "../../db/client";
import { apiError } from "../../lib/errors";
import { plural } from "../../lib/plural";
import { recordAllowed, requireRole } from "../access/require-role";
import { MAX_DISMISS_IDS, moveDeadLetters } from "../actions/dismiss";
import { MAX_REPLAY_IDS, replayByIds, replayRoute } from "../actions/replay-actions";
import type { OperatorAction } from "../audit-log/record";
import { receiptsTarget } from "../audit-log/targets";
import type { AdminEnv } from "../guards/auth";
import {
  DEAD_DELIVERIES_CURSOR,
  type DeadDeliveriesPage,
  deadDeliveriesPage,
  parseDeadDeliveriesCursor,
} from "../receipts/dead-deliveries";
import {
  isReceiptId,
  parseReceiptFilter,
  RECEIPT_FILTER_PARAMETERS,
  type ReceiptFilter,
  rejectUnknownParameters,
} from "../receipts/filters";
import { searchReceipts } from "../receipts/lists";
import { inFirstDatabase } from "../receipts/receipt-databases";
import { receiptDetail } from "../receipts/receipt-detail";
import { receiptNotFound } from "../receipts/receipt-not-found";
import { filterProblem, setFlash, takeFlash } from "./flash";
import { DeadLettersPage } from "./pages/dead";
import { ReceiptPage } from "./pages/receipt";
import { ReceiptsPage } from "./pages/receipts";

/** The dashboard's receipts and dead letters: search, one receipt, replay, dismiss and restore. */
export const receiptPages = new Hono<AdminEnv>();

const REPLAY_OUTCOMES: Record<string, string> = {
  replayed: "Replayed: the receipt is back on the queue.",
  not_found: "Not replayed: no receipt has this id.",
  in_flight: "Not replayed: the receipt is already pending or processing.",
  payload_expired: "Not replayed: its body is past payload retention.",
  dismissed: "Not replayed: it is dismissed; restore it first.",
  no_such_route: "Not replayed: the receipt has no delivery to that route.",
  delivered: "Not replayed: that route's delivery has finished.",
};

receiptPages.get("/receipts", async (c) => {
  const query = c.req.query();
  let filter: ReceiptFilter | undefined;
  const problem = await filterProblem(() => {
    rejectUnknownParameters(query, RECEIPT_FILTER_PARAMETERS);
    filter = parseReceiptFilter(query);
  });
  const page = filter ? await searchReceipts(c.env, filter) : null;
  return c.html(<ReceiptsPage query={query} page={page} problem={problem} />, problem ? 400 : 200);
});

receiptPages.get("/receipts/:receiptId", async (c) => {
  const receiptId = c.req.param("receiptId");
  const detail = isReceiptId(receiptId)
    ? await inFirstDatabase(c.env, (databaseEnv) => receiptDetail(database(databaseEnv), receiptId, c.env))
    : null;
  if (!detail)
    throw isReceiptId(receiptId)
      ? await receiptNotFound(c.env, receiptId)
      : apiError(404, "receipt_not_found", "No receipt has this id.");
  return c.html(<ReceiptPage detail={detail} role={c.get("actor").role} flash={takeFlash(c)} />);
});

receiptPages.post("/receipts/:receiptId/replay", requireRole("operator", "replay"), async (c) => {
  const receiptId = c.req.param("receiptId");
  if (!isReceiptId(receiptId)) throw apiError(400, "invalid_receipt_id", "A receipt id is a 26-character ULID.");
  const [report] = (await replayByIds(c.env, [receiptId], "dashboard")).results;
  await recordAllowed(c, "replay", receiptsTarget([receiptId]), report?.outcome === "replayed" ? 1 : 0);
  setFlash(c, REPLAY_OUTCOMES[report?.outcome ?? "not_found"] ?? `Replay: ${report?.outcome}.`);
  return c.redirect(`/admin/receipts/${receiptId}`, 303);
});

/**
 * One route's delivery of a receipt replayed alone (the dead letters page's further deliveries): the same per-route
 * replay as POST /admin/api/receipts/<id>/replay?route= (../actions/replay-actions.ts).
 */
receiptPages.post("/receipts/:receiptId/routes/:route/replay", requireRole("operator", "replay"), async (c) => {
  const { receiptId, route } = c.req.param();
  if (!isReceiptId(receiptId)) throw apiError(400, "invalid_receipt_id", "A receipt id is a 26-character ULID.");
  const outcome = (await replayRoute(c.env, receiptId, route, "dashboard")).kind;
  await recordAllowed(c, "replay", receiptsTarget([receiptId], route), outcome === "replayed" ? 1 : 0);
  const message = REPLAY_OUTCOMES[outcome] ?? `Replay: ${outcome}.`;
  setFlash(c, outcome === "replayed" ? `Replayed: route ${route}'s delivery is back on the queue.` : message);
  return c.redirect("/admin/dead", 303);
});

const DEAD_PARAMETERS = [
  "source",
  "type",
  "eventKey",
  "since",
  "until",
  "before",
  "after",
  "limit",
  "show",
  DEAD_DELIVERIES_CURSOR,
] as const;

receiptPages.get("/dead", async (c) => {
  const query = c.req.query();
  const dismissed = query.show === "dismissed";
  let filter: ReceiptFilter | undefined;
  let deliveriesCursor: ReturnType<typeof parseDeadDeliveriesCursor> = null;
  const problem = await filterProblem(() => {
    rejectUnknownParameters(query, DEAD_PARAMETERS);
    if (query.show && query.show !== "dismissed")
      throw apiError(400, "invalid_query", 'Query parameter "show" must be empty or "dismissed".');
    const { show: _show, [DEAD_DELIVERIES_CURSOR]: deliveriesBefore, ...rest } = query;
    filter = parseReceiptFilter({ ...rest, status: dismissed ? "dismissed" : "dead" });
    deliveriesCursor = parseDeadDeliveriesCursor(deliveriesBefore);
  });
  const [page, deliveries]: [Awaited<ReturnType<typeof searchReceipts>> | null, DeadDeliveriesPage | null] = filter
    ? await Promise.all([
        searchReceipts(c.env, filter),
        dismissed ? null : deadDeliveriesPage(c.env, filter, deliveriesCursor),
      ])
    : [null, null];
  return c.html(
    <DeadLettersPage
      query={query}
      page={page}
      deliveries={deliveries}
      dismissed={dismissed}
      role={c.get("actor").role}
      flash={takeFlash(c)}
      problem={problem}
    />,
    problem ? 400 : 200,
  );
});

/** Every dead-letter action posts here: replay (selected or the whole page), dismiss, restore. */
receiptPages.post("/dead/action", requireRole("operator", deadLettersAction), async (c) => {
  const form = await c.req.parseBody({ all: true });
  const action = form.action;
  const field = action === "replay-page" ? form.pageReceiptId : form.receiptId;
  const receiptIds = [
    ...new Set(
      (Array.isArray(field) ? field : field === undefined ? [] : [field]).filter(
        (id): id is string => typeof id === "string" && isReceiptId(id),
      ),
    ),
  ];
  const back = form.back === "dismissed" ? "/admin/dead?show=dismissed" : "/admin/dead";
  const single =
    receiptIds.length === 1 && form.pageReceiptId === undefined ? `/admin/receipts/${receiptIds[0]}` : back;
  if (receiptIds.length === 0) {
    setFlash(c, "Nothing selected: tick the receipts first.");
    return c.redirect(back, 303);
  }
  switch (action) {
    case "replay":
    case "replay-page": {
      if (receiptIds.length > MAX_REPLAY_IDS)
        throw apiError(400, "invalid_body", `At most ${MAX_REPLAY_IDS} receipts per replay.`);
      const report = await replayByIds(c.env, receiptIds, "dashboard");
      await recordAllowed(c, "replay", receiptsTarget(receiptIds), report.replayed);
      setFlash(c, `${plural(report.replayed, "receipt")} replayed.`);
      return c.redirect(back, 303);
    }
    case "dismiss": {
      if (receiptIds.length > MAX_DISMISS_IDS)
        throw apiError(400, "invalid_body", `At most ${MAX_DISMISS_IDS} receipts at once.`);
      const report = await moveDeadLetters(c.env, "dismiss", receiptIds);
      await recordAllowed(c, "dismiss", receiptsTarget(receiptIds), report.changed.length);
      setFlash(
        c,
        `${plural(report.changed.length, "dead letter")} dismissed${report.unchanged.length ? ` (${report.unchanged.length} no longer dead)` : ""}.`,
      );
      return c.redirect(single, 303);
    }
    case "restore": {
      if (receiptIds.length > MAX_DISMISS_IDS)
        throw apiError(400, "invalid_body", `At most ${MAX_DISMISS_IDS} receipts at once.`);
      const report = await moveDeadLetters(c.env, "restore", receiptIds);
      await recordAllowed(c, "restore", receiptsTarget(receiptIds), report.changed.length);
      setFlash(c, `${plural(report.changed.length, "receipt")} restored to the dead letters.`);
      return c.redirect(single, 303);
    }
    default:
      throw apiError(400, "invalid_body", "Unknown action: replay, replay-page, dismiss or restore.");
  }
});

/** The dead letters form's action, as the audit log names it (a refusal is logged before the handler reads the form). */
async function deadLettersAction(c: Context<AdminEnv>): Promise<OperatorAction> {
  const action = (await c.req.parseBody({ all: true })).action;
  return action === "dismiss" || action === "restore" ? action : "replay";
}
