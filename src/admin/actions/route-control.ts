import { sendResumed } from "../../consumers/gate/delivery-release";
import { deliveryGate } from "../../gate/client";
import type { DeliveryControl } from "../../gate/control";
import type { GateStatus } from "../../gate/gate";
import { registerGate } from "../../gate/known-gates";
import { apiError } from "../../lib/errors";
import { logError, logEvent } from "../../lib/log";
import type { SourceConfig, SourceRoute } from "../../sources/config";
import { lookupSource } from "../../sources/registry";

/**
 * Pausing and resuming a route (docs/routing.md "Delivery control"), for the admin API, the CLI and the dashboard.
 * Only a route with a control option has a gate to pause (`paused = false` is enough): every other route's
 * deliveries never ask one, which is what keeps them at no extra cost.
 */

export interface RouteControlView {
  source: string;
  route: string;
  control: DeliveryControl;
  /** Paused in config (`paused = true`): only a deploy resumes it. */
  pausedInConfig: boolean;
  gate: GateStatus;
}

/** The source's valid config by name; else the 4xx saying why there is none. */
export function configuredSource(env: Env, sourceName: string): SourceConfig {
  const lookup = lookupSource(env, sourceName);
  if (lookup.kind === "unknown")
    throw apiError(404, "unknown_source", "No webhook source is configured under this name.");
  if (lookup.kind === "invalid")
    throw apiError(
      409,
      "source_config_invalid",
      "This source's config is refused; fix it first (GET /admin/api/sources names the problems).",
    );
  return lookup.source;
}

/** The source's route by name; else the 404 naming the routes it has. */
export function namedRoute(source: SourceConfig, routeName: string): SourceRoute {
  const route = source.routes.find(({ rules }) => rules.name === routeName);
  if (!route)
    throw apiError(
      404,
      "unknown_route",
      `This source has no route named ${routeName}; its routes are ${source.routes.map(({ rules }) => rules.name).join(", ")}.`,
    );
  return route;
}

/** The source's route by name, when it has a gate; else the 4xx saying why not. */
export function controlledRoute(env: Env, sourceName: string, routeName: string): { control: DeliveryControl } {
  const route = namedRoute(configuredSource(env, sourceName), routeName).rules;
  if (route.control === null) {
    throw apiError(
      409,
      "route_not_controlled",
      `Route ${routeName} has no delivery control, so nothing can pause it: add paused = false to the route in config to make it pausable.`,
    );
  }
  return { control: route.control };
}

export async function routeControlView(env: Env, sourceName: string, routeName: string): Promise<RouteControlView> {
  const { control } = controlledRoute(env, sourceName, routeName);
  const gate = await deliveryGate(env, sourceName, routeName).status();
  return { source: sourceName, route: routeName, control, pausedInConfig: control.paused, gate };
}

export async function pauseRoute(env: Env, sourceName: string, routeName: string): Promise<RouteControlView> {
  const { control } = controlledRoute(env, sourceName, routeName);
  const gate = await deliveryGate(env, sourceName, routeName).pause();
  // Known at once, so a deploy that removes the route before the next cron run still has its pause forgotten
  // (src/reconcile/route-gates.ts). Only that is at stake, and the cron registers every configured gated route too:
  // D1 refusing must not refuse the pause.
  await registerGate(env, sourceName, routeName).catch((error: unknown) =>
    logError("route.register_failed", error, { source: sourceName, route: routeName }),
  );
  logEvent("route.paused", { source: sourceName, route: routeName });
  return { source: sourceName, route: routeName, control, pausedInConfig: control.paused, gate };
}

/**
 * Unpauses the route and sends what it held at once, in received order: each held receipt is due again now and goes
 * back on the queue in that order (src/consumers/gate/delivery-release.ts, `sendResumed`).
 */
export async function resumeRoute(
  env: Env,
  sourceName: string,
  routeName: string,
): Promise<RouteControlView & { resumed: number }> {
  const { control } = controlledRoute(env, sourceName, routeName);
  if (control.paused)
    throw apiError(
      409,
      "paused_in_config",
      `Route ${routeName} is paused in config (paused = true): set paused = false and deploy to resume it.`,
    );
  const { status, held } = await deliveryGate(env, sourceName, routeName).resume();
  await sendResumed(env, sourceName, routeName, held);
  logEvent("route.resumed", { source: sourceName, route: routeName, resumed: held.length });
  return { source: sourceName, route: routeName, control, pausedInConfig: false, gate: status, resumed: held.length };
}
