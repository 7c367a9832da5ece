import { Hono, type Context } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { csrf } from "hono/csrf";
import { HTTPException } from "hono/http-exception";
import { tokensEqual } from "../../crypto/hmac";
import { database } from "../../db/client";
import { apiError, renderError } from "../../lib/errors";
import { adminToken, hasSession, issueSession, SESSION_COOKIE, SESSION_TTL_MS, type AdminEnv } from "../auth";
import { isReceiptId, parseCursor, parseLimit, parseReceiptFilter, parseWindow } from "../filters";
import { listAlerts, listQuarantine, receiptDetail, searchReceipts } from "../queries";
import { MAX_REPLAY_IDS, replayByIds } from "../replay";
import { sourcesHealth } from "../../sources/registry";
import { sourceStats } from "../stats";
import { DASHBOARD_CSP } from "./layout";
import { AlertsPage, DeadLettersPage, LoginPage, OverviewPage, ProblemPage, QuarantinePage, ReceiptPage, ReceiptsPage, SourcePage } from "./pages";

/**
 * /admin — the dashboard, rendered on the server with Hono JSX. Signing in trades the admin token for an
 * HttpOnly, SameSite=Strict, Secure session cookie; forms post back here (CSRF-checked by Origin), so no page
 * runs a script and the token is never in a URL or in script-readable storage.
 */
export const dashboard = new Hono<AdminEnv>();

dashboard.use("*", async (c, next) => {
  await next();
  c.header("content-security-policy", DASHBOARD_CSP);
  c.header("cache-control", "no-store");
  c.header("referrer-policy", "no-referrer");
  c.header("x-content-type-options", "nosniff");
});
dashboard.use("*", csrf());

dashboard.get("/login", async (c) => {
  if (await hasSession(c)) return c.redirect("/admin", 303);
  return c.html(<LoginPage />);
});

dashboard.post("/login", async (c) => {
  const expected = adminToken(c.env);
  if (!expected) return c.html(<LoginPage problem="The dashboard is disabled: set the ADMIN_TOKEN secret." />, 503);
  const form = await c.req.parseBody();
  const presented = typeof form.token === "string" ? form.token : "";
  if (!(await tokensEqual(presented, expected))) return c.html(<LoginPage problem="That token was not accepted." />, 401);
  setCookie(c, SESSION_COOKIE, await issueSession(expected), {
    path: "/admin",
    httpOnly: true,
    secure: true,
    sameSite: "Strict",
    maxAge: SESSION_TTL_MS / 1000,
  });
  return c.redirect("/admin", 303);
});

dashboard.post("/logout", (c) => {
  deleteCookie(c, SESSION_COOKIE, { path: "/admin", secure: true });
  return c.redirect("/admin/login", 303);
});

dashboard.use("*", async (c, next) => {
  if (await hasSession(c)) return next();
  if (c.req.method === "GET") return c.redirect("/admin/login", 303);
  throw apiError(401, "unauthorized", "Sign in first.");
});

dashboard.get("/", async (c) => {
  const db = database(c.env);
  const [report, alerts] = await Promise.all([
    sourceStats(c.env, db, parseWindow(c.req.query())),
    listAlerts(db, { state: "open", limit: 50 }),
  ]);
  return c.html(<OverviewPage report={report} alerts={alerts} config={sourcesHealth(c.env)} />);
});

dashboard.get("/sources/:source", async (c) => {
  const db = database(c.env);
  const onlySource = c.req.param("source");
  const [report, alerts] = await Promise.all([
    sourceStats(c.env, db, parseWindow(c.req.query()), { onlySource }),
    listAlerts(db, { source: onlySource, limit: 50 }),
  ]);
  const problems = sourcesHealth(c.env).invalid[onlySource];
  if (report.sources.length === 0 && !problems) throw apiError(404, "unknown_source", "No configured or recorded source has this name.");
  return c.html(<SourcePage name={onlySource} report={report} alerts={alerts} problems={problems} />);
});

dashboard.get("/receipts", async (c) => {
  const query = c.req.query();
  const filter = parseReceiptFilter(query);
  const page = await searchReceipts(database(c.env), filter);
  return c.html(<ReceiptsPage query={query} filter={filter} receipts={page.receipts} nextCursor={page.nextCursor} />);
});

dashboard.get("/receipts/:receiptId", async (c) => {
  const receiptId = c.req.param("receiptId");
  const detail = isReceiptId(receiptId) ? await receiptDetail(database(c.env), receiptId) : null;
  if (!detail) throw apiError(404, "receipt_not_found", "No receipt has this id.");
  const replayed = c.req.query("replay");
  return c.html(<ReceiptPage detail={detail} flash={replayed ? `Replay: ${replayed}.` : undefined} />);
});

dashboard.post("/receipts/:receiptId/replay", async (c) => {
  const receiptId = c.req.param("receiptId");
  if (!isReceiptId(receiptId)) throw apiError(400, "invalid_receipt_id", "A receipt id is a 26-character ULID.");
  const [report] = (await replayByIds(c.env, [receiptId])).results;
  return c.redirect(`/admin/receipts/${receiptId}?replay=${encodeURIComponent(report?.outcome ?? "not_found")}`, 303);
});

dashboard.get("/dead", async (c) => {
  const query = c.req.query();
  const page = await searchReceipts(database(c.env), parseReceiptFilter({ ...query, status: "dead" }));
  const replayed = c.req.query("replayed");
  return c.html(
    <DeadLettersPage
      query={query}
      receipts={page.receipts}
      nextCursor={page.nextCursor}
      flash={replayed !== undefined ? `${Number(replayed) || 0} receipt(s) replayed.` : undefined}
    />,
  );
});

dashboard.post("/dead/replay", async (c) => {
  const form = await c.req.parseBody({ all: true });
  const field = form.scope === "page" ? form.pageReceiptId : form.receiptId;
  const receiptIds = [...new Set((Array.isArray(field) ? field : field === undefined ? [] : [field]).filter((id): id is string => typeof id === "string" && isReceiptId(id)))];
  if (receiptIds.length > MAX_REPLAY_IDS) throw apiError(400, "invalid_body", `At most ${MAX_REPLAY_IDS} receipts per replay.`);
  const report = receiptIds.length > 0 ? await replayByIds(c.env, receiptIds) : { replayed: 0 };
  return c.redirect(`/admin/dead?replayed=${report.replayed}`, 303);
});

dashboard.get("/quarantine", async (c) => {
  const query = c.req.query();
  const page = await listQuarantine(database(c.env), { source: query.source || undefined, before: parseCursor(query), limit: parseLimit(query) });
  return c.html(<QuarantinePage page={page} />);
});

dashboard.get("/alerts", async (c) => {
  return c.html(<AlertsPage alerts={await listAlerts(database(c.env), { limit: 200 })} />);
});

/** Problems on a page are shown as a page: the same messages the API puts in its JSON envelope. */
dashboard.onError(async (error: Error, c: Context) => {
  if (!(error instanceof HTTPException)) return renderError(error, c);
  const response = error.getResponse();
  if (response.status === 401 || response.status === 403) return response;
  const envelope = await response.json<{ error?: { message?: string } }>().catch(() => null);
  return c.html(<ProblemPage status={response.status} message={envelope?.error?.message ?? "Request not understood."} />, response.status as 400);
});
