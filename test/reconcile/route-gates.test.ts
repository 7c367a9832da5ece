import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { deliveryGate, gateName } from "../../src/gate/client";
import type { DeliveryControl } from "../../src/gate/control";
import { ulid } from "../../src/lib/ulid";
import { systemMonitor } from "../../src/monitor/report";
import { loadSources } from "../../src/sources/registry";
import { adminGet } from "../admin/support";
import { receiptRow } from "../consumers/support/processing";
import { pauseThenSend, send } from "../routing/gate-support";
import { eventually } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, runCron, runsAt } from "./support";

/**
 * The cron's route-gates step (src/reconcile/route-gates.ts; docs/routing.md "When a route leaves the config"): a
 * route a deploy removes, renames or strips of its control options leaves no admin pause, no held deliveries, no
 * open breaker and no open `route-breaker-open` alert behind, and a route of that name added again starts clean.
 * The deploys are the cron run with other SOURCES (only the two gate fixtures, test/fixtures/sources/gates.json);
 * everything else (the pause, the held deliveries, /health, the route's state) goes through the real routes.
 */

const tables = env.SOURCES as Record<string, Record<string, unknown>>;
const pausedTable = tables["gate-paused"]!;
const breakerTable = tables["gate-breaker"]!;
type RouteTable = Record<string, unknown>;
const heldRoute = (pausedTable.routes as RouteTable[])[0]!;
const flakyRoute = (breakerTable.routes as RouteTable[])[0]!;

/** The deployed config of the two gate sources, with their routes replaced where given. */
function deployed(routes: { paused?: RouteTable[] | "refused"; breaker?: RouteTable[] } = {}): Env {
  const paused =
    routes.paused === "refused"
      ? { ...pausedTable, rate_limit: "20/s" } // a route option at the source's level: the source is refused
      : { ...pausedTable, routes: routes.paused ?? pausedTable.routes };
  return {
    ...env,
    SOURCES: {
      "gate-paused": paused,
      "gate-breaker": { ...breakerTable, routes: routes.breaker ?? breakerTable.routes },
    },
  } as Env;
}

/** The breaker's own flaky route, as the deployed config has it. */
function flakyControl(): DeliveryControl {
  return loadSources(env).get("gate-breaker")!.routes[0]!.rules.control!;
}

/** Two failed attempts at gate-breaker/flaky, told to its gate as the consumer tells it: its breaker opens. */
async function openBreaker(): Promise<void> {
  const gate = deliveryGate(env, "gate-breaker", "flaky");
  const failed = [crypto.randomUUID(), crypto.randomUUID()].map((attempt) => ({
    id: attempt,
    verdict: "failure" as const,
  }));
  await gate.release(flakyControl(), failed, Date.now(), gateName("gate-breaker", "flaky"));
  expect(await gate.status()).toMatchObject({ breakerOpen: true });
}

async function breakerAlertReporters(): Promise<string[]> {
  return (await systemMonitor(env).list())
    .filter((alert) => alert.kind === "route-breaker-open" && alert.state === "open")
    .flatMap((alert) => alert.reporters);
}

async function healthReasons(): Promise<string[]> {
  const answer = await (await exports.default.fetch(new Request("https://receiver.test/health"))).json<{
    reasons?: string[];
  }>();
  return answer.reasons ?? [];
}

async function routeGate(source: string, route: string) {
  const answer = await adminGet(`/admin/api/sources/${source}/routes/${route}`);
  expect(answer.status).toBe(200);
  return (await answer.json<{ gate: { paused: boolean; breakerOpen: boolean; failures: number; held: number } }>())
    .gate;
}

describe("a route that leaves the config", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("is forgotten after two cron runs without it: pause, held deliveries, breaker and alert; added again, it starts clean", async () => {
    const clock = Date.now();
    const held = await pauseThenSend("gate-paused", "held", 2);
    await eventually(
      async () => ((await routeGate("gate-paused", "held")).held === 2 ? true : undefined),
      30_000,
      "two held",
    );
    await openBreaker();
    expect(await breakerAlertReporters()).toEqual(["route:gate-breaker/flaky"]);
    expect(await healthReasons()).toContain("route-breaker-open");

    // A source whose config is refused has unknown routes, not removed ones: however many runs, nothing is forgotten.
    // (No run has seen gate-paused's routes yet: its pause alone made held known.)
    await runCron(clock + 1, deployed({ paused: "refused" }));
    await runCron(clock + 2, deployed({ paused: "refused" }));
    expect(await routeGate("gate-paused", "held")).toMatchObject({ paused: true, held: 2 });

    // Renamed (held → held-v2), and the breaker taken out of flaky (its only control option, so its gate is never
    // asked again). One run is not enough: a deploy still rolling out may answer with both configs.
    const renamed = deployed({
      paused: [{ ...heldRoute, name: "held-v2" }],
      breaker: [{ name: "flaky", destination: flakyRoute.destination }],
    });
    await runCron(clock + 3, renamed);
    expect(await routeGate("gate-paused", "held")).toMatchObject({ paused: true, held: 2 });
    expect(await breakerAlertReporters()).toEqual(["route:gate-breaker/flaky"]);

    await runCron(clock + 4, renamed);
    expect(await breakerAlertReporters()).toEqual([]);
    expect(await healthReasons()).not.toContain("route-breaker-open");
    const recorded = await env.DB.prepare("SELECT state FROM alerts WHERE kind = 'route-breaker-open'").all<{
      state: string;
    }>();
    expect(recorded.results.map((row) => row.state)).toEqual(["resolved"]);

    // Added again (the deployed config has both routes as they were): running, breaker closed, nothing held.
    expect(await routeGate("gate-paused", "held")).toMatchObject({ paused: false, held: 0, breakerOpen: false });
    expect(await routeGate("gate-breaker", "flaky")).toMatchObject({ breakerOpen: false, failures: 0 });
    const fresh = await send("gate-paused", 3);
    await eventually(async () => ((await receiptRow(fresh)).status === "processed" ? true : undefined), 60_000, "sent");
    // The deliveries it held lost nothing: each is still pending in D1 and looks again on its own.
    for (const receiptId of held) expect(await receiptRow(receiptId)).toMatchObject({ status: "pending", attempts: 0 });
    const [run] = await runsAt(clock + 4);
    expect(run!.failures).toBeNull();
    expect(run!.counts.routeGates).toMatchObject({ forgotten: 2, heldForgotten: 2 });
  });

  it("drops what a route paused in config held, once a deploy removes the route", async () => {
    const clock = Date.now();
    // A route that holds everything from the start (paused = true), in a deploy that has it.
    const staged = { ...heldRoute, name: "staged", paused: true };
    const withStaged = deployed({ paused: [heldRoute, staged] });
    const control = loadSources(withStaged).get("gate-paused")!.routes[1]!.rules.control!;
    const gate = deliveryGate(env, "gate-paused", "staged");
    // What the consumer asks of the route's gate for one of its deliveries: held, and remembered for a resume.
    const asked = await gate.admit(control, [{ id: ulid(clock), database: "DB" }], clock, {
      slotMs: 60_000,
      atOnce: 6,
    });
    expect(asked.held.map((hold) => hold.reason)).toEqual(["paused"]);
    await runCron(clock, withStaged);
    expect(await gate.status()).toMatchObject({ held: 1 });

    await runCron(clock + 1, deployed());
    await runCron(clock + 2, deployed());
    expect(await gate.status()).toMatchObject({ paused: false, held: 0 });
  });

  it("closes a breaker its route's config no longer has in the next cron run, with no attempt needed", async () => {
    const clock = Date.now();
    await openBreaker();
    expect(await breakerAlertReporters()).toEqual(["route:gate-breaker/flaky"]);

    // The route keeps a gate (a rate limit), so it stays; only its breaker went. No delivery comes to close it.
    await runCron(
      clock,
      deployed({ breaker: [{ name: "flaky", destination: flakyRoute.destination, rate_limit: "100/s" }] }),
    );
    expect(await breakerAlertReporters()).toEqual([]);
    expect(await healthReasons()).not.toContain("route-breaker-open");
    expect(await deliveryGate(env, "gate-breaker", "flaky").status()).toMatchObject({
      breakerOpen: false,
      failures: 0,
    });
    const [run] = await runsAt(clock);
    expect(run!.counts.routeGates).toMatchObject({ breakersClosed: 1, forgotten: 0 });
  });
});
