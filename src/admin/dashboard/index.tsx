import { type Context, Hono } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { csrf } from "hono/csrf";
import { HTTPException } from "hono/http-exception";
import { tokensEqual } from "../../crypto/hmac";
import { database } from "../../db/client";
import { ApiError, apiError } from "../../lib/errors";
import { logError } from "../../lib/log";
import { shardThresholds } from "../../monitor/conditions";
import { lookupSource, sourcesHealth } from "../../sources/registry";
import { recordAllowed, requireRole } from "../access/require-role";
import { signInDashboard } from "../access/sign-in";
import { pauseRoute, resumeRoute, routeControlView } from "../actions/route-control";
import { routeTarget } from "../audit-log/targets";
import {
  type AdminEnv,
  adminToken,
  adminTokenConfigError,
  hasSession,
  issueSession,
  SESSION_COOKIE,
  SESSION_TTL_MS,
} from "../guards/auth";
import { forgetLoginFailures, loginClient, refuseWrongToken } from "../guards/login-throttle";
import { listAlerts } from "../health/alerts";
import { systemHealth } from "../health/system-health";
import { verificationReport } from "../health/verification-report";
import { parseCursor, parseLimit, parseWindow } from "../receipts/filters";
import { listQuarantine } from "../receipts/lists";
import { deliveryMetricsFor } from "../stats/analytics-query";
import { emptySeries, sourceSeries } from "../stats/series";
import { sourceStats } from "../stats/stats";
import { auditLogPages } from "./audit-log-route";
import { setFlash, takeFlash } from "./flash";
import { issuePages } from "./issue-routes";
import { DASHBOARD_CSP } from "./layout";
import { AlertsPage } from "./pages/alerts";
import { LoginPage, ProblemPage } from "./pages/login";
import { OverviewPage } from "./pages/overview";
import { QuarantinePage } from "./pages/quarantine";
import { SourcePage } from "./pages/source";
import { OverviewWithoutStatsPage, SystemPage } from "./pages/system";
import { receiptPages } from "./receipt-routes";
import { replayJobPages } from "./replay-job-routes";
import { shardTotals, summarizeSystem } from "./system-summary";

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
  const configError = adminTokenConfigError(c.env);
  if (configError) return c.html(<LoginPage problem={configError.message} />, 503);
  if (!expected) return c.html(<LoginPage problem="The dashboard is disabled: set the ADMIN_TOKEN secret." />, 503);
  const client = loginClient(c.req.raw);
  const form = await c.req.parseBody();
  const presented = typeof form.token === "string" ? form.token : "";
  // The token is checked before the throttle: the right one always signs in (./guards/login-throttle.ts).
  if (!(await tokensEqual(presented, expected))) {
    const retryAfter = refuseWrongToken(client, Date.now());
    if (retryAfter !== null) {
      c.header("retry-after", String(retryAfter));
      return c.html(
        <LoginPage problem={`Too many failed sign-ins from your address: try again in ${retryAfter} s.`} />,
        429,
      );
    }
    return c.html(<LoginPage problem="That token was not accepted." />, 401);
  }
  forgetLoginFailures(client);
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

// The session, or Cloudflare Access's assertion (../access/sign-in.ts); else off to the sign-in form.
dashboard.use("*", signInDashboard);

dashboard.get("/", async (c) => {
  const db = database(c.env);
  const windowMs = parseWindow(c.req.query());
  // No shard is asked here: that is one RPC per shard of every source (8 per source by default) on every view of
  // the most viewed page. A shard past its threshold already opens a shard-storage incident, which the panel
  // shows; the sizes themselves are on /admin/system.
  const system = systemHealth(c.env, null).then(summarizeSystem);
  let stats;
  try {
    const { readout } = await deliveryMetricsFor(c.env, windowMs);
    stats = await Promise.all([
      sourceStats(c.env, windowMs, { metrics: readout?.totals ?? null }),
      sourceSeries(c.env, { metrics: readout?.hourly ?? null }),
      listAlerts(db, { state: "open", limit: 50 }),
    ]);
  } catch (error) {
    // D1 down, most likely: the system monitor does not depend on it, so show what it knows rather than nothing.
    logError("dashboard.stats_failed", error, {});
    return c.html(<OverviewWithoutStatsPage summary={await system} config={sourcesHealth(c.env)} />, 503);
  }
  const [report, series, alerts] = stats;
  return c.html(
    <OverviewPage
      report={report}
      series={series}
      alerts={alerts}
      config={sourcesHealth(c.env)}
      system={await system}
    />,
  );
});

dashboard.get("/system", async (c) => {
  const health = await systemHealth(c.env);
  return c.html(
    <SystemPage
      summary={summarizeSystem(health)}
      shards={shardTotals(health)}
      shardAlertBytes={shardThresholds(c.env).storageBytes}
      config={sourcesHealth(c.env)}
    />,
  );
});

dashboard.get("/sources/:source", async (c) => {
  const db = database(c.env);
  const onlySource = c.req.param("source");
  const now = Date.now();
  const windowMs = parseWindow(c.req.query());
  const { readout, note } = await deliveryMetricsFor(c.env, windowMs, onlySource);
  const [report, series, alerts] = await Promise.all([
    sourceStats(c.env, windowMs, { onlySource, now, metrics: readout?.totals ?? null }),
    sourceSeries(c.env, { onlySource, now, metrics: readout?.hourly ?? null }),
    listAlerts(db, { source: onlySource, limit: 50 }),
  ]);
  const problems = sourcesHealth(c.env).invalid[onlySource];
  if (report.sources.length === 0 && !problems)
    throw apiError(404, "unknown_source", "No configured or recorded source has this name.");
  const points = series.get(onlySource) ?? emptySeries(now, 24, readout ? 0 : null);
  if (note) report.notes.analyticsEngine = note;
  // Each route with delivery control has a gate to show (one Durable Object request each); any other route has none.
  const lookup = lookupSource(c.env, onlySource);
  const [routes, verification] =
    lookup.kind === "valid"
      ? await Promise.all([
          Promise.all(
            lookup.source.routes
              .filter(({ rules }) => rules.control !== null)
              .map(({ rules }) => routeControlView(c.env, onlySource, rules.name)),
          ),
          verificationReport(c.env, lookup.source, windowMs),
        ])
      : [[], undefined];
  return c.html(
    <SourcePage
      name={onlySource}
      report={report}
      points={points}
      alerts={alerts}
      problems={problems}
      routes={routes}
      verification={verification}
      now={now}
      role={c.get("actor").role}
      flash={takeFlash(c)}
    />,
  );
});

/** The source page's Pause / Resume button (../route-control.ts). */
const routeChange = (c: Context<AdminEnv>) => c.req.param("change") as "pause" | "resume";

dashboard.post(
  "/sources/:source/routes/:route/:change{pause|resume}",
  requireRole("operator", routeChange),
  async (c) => {
    const { source, route } = c.req.param();
    const change = routeChange(c);
    let affected = 1;
    if (change === "pause") {
      await pauseRoute(c.env, source, route);
      setFlash(c, `Route ${route} paused: its deliveries are held until it is resumed.`);
    } else {
      const { resumed } = await resumeRoute(c.env, source, route);
      affected = resumed;
      setFlash(
        c,
        `Route ${route} resumed: ${resumed} held ${resumed === 1 ? "delivery" : "deliveries"} sent on, oldest first.`,
      );
    }
    await recordAllowed(c, change, routeTarget(source, route), affected);
    return c.redirect(`/admin/sources/${encodeURIComponent(source)}`, 303);
  },
);

dashboard.route("/", receiptPages);
dashboard.route("/", auditLogPages);
dashboard.route("/", replayJobPages);
dashboard.route("/", issuePages);

dashboard.get("/quarantine", async (c) => {
  const query = c.req.query();
  const page = await listQuarantine(c.env, {
    source: query.source || undefined,
    before: parseCursor(query),
    limit: parseLimit(query),
  });
  return c.html(<QuarantinePage page={page} />);
});

dashboard.get("/alerts", async (c) => {
  const source = c.req.query("source") || undefined;
  const stateParam = c.req.query("state") || undefined;
  const state = stateParam === "open" || stateParam === "resolved" ? stateParam : undefined;
  const alerts = await listAlerts(database(c.env), { source, state, limit: 200 });
  return c.html(<AlertsPage alerts={alerts} source={source} state={state} />);
});

/**
 * Problems on a page are shown as a page: the same messages the API puts in its JSON envelope. An unexpected
 * failure (D1 down, most often) is a page too, pointing at /admin/system, which does not need D1.
 */
dashboard.onError(async (error: Error, c: Context) => {
  if (!(error instanceof HTTPException)) {
    logError("request.failed", error, { path: new URL(c.req.url).pathname, method: c.req.method });
    return c.html(
      <ProblemPage status={500} message="This page could not be loaded; the error is in the Worker's log." />,
      500,
    );
  }
  if (error.status === 401 || error.status === 403) return error.getResponse();
  const message = error instanceof ApiError ? error.message : "Request not understood.";
  return c.html(<ProblemPage status={error.status} message={message} />, error.status as 400);
});
