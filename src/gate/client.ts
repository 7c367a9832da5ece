import type { DeliveryControl } from "./control";
import type { AdmitOptions, AttemptVerdict, HoldReason } from "./decide";
import type { GateDelivery } from "./gate";

/**
 * The caller's side of the gates (gate.ts): one Durable Object per (source, route), asked once per consumer slice
 * for all of that route's deliveries in it. A route without control options is never asked: its deliveries cost
 * exactly what they cost without gates.
 */

export function gateName(source: string, route: string): string {
  return `${source}/${route}`;
}

export function deliveryGate(env: Pick<Env, "DELIVERY_GATES">, source: string, route: string) {
  return env.DELIVERY_GATES.get(env.DELIVERY_GATES.idFromName(gateName(source, route)));
}

/** One delivery about to be attempted: `control` null means its route has none, and it goes without asking. */
export interface GatedDelivery {
  id: string;
  source: string;
  route: string;
  control: DeliveryControl | null;
}

export type Hold = { waitMs: number; reason: HoldReason };

/** What the gates answered, by gate (`gateName`) and then delivery id. */
export interface GateAnswers {
  /** Deliveries that must wait, and how long. */
  holds: Map<string, Map<string, Hold>>;
  /** Admitted deliveries that may start only at a later time (a rate limit's pacing, src/gate/decide.ts). */
  startAt: Map<string, Map<string, number>>;
}

/**
 * Which deliveries must wait, and how long, and which may start only later; every delivery in neither may go now. A
 * receipt has one delivery per route, so one id can be asked about at several gates. Deliveries are asked about in
 * the order given (received order), so within a route the earliest go first.
 */
export async function askGates(
  env: Pick<Env, "DELIVERY_GATES">,
  deliveries: readonly GatedDelivery[],
  database: string,
  now: number,
  options: AdmitOptions,
): Promise<GateAnswers> {
  const holds = new Map<string, Map<string, Hold>>();
  const startAt = new Map<string, Map<string, number>>();
  const asks = [...byRoute(deliveries)].map(async ([name, group]) => {
    const { source, route, control } = group[0]!;
    const answer = await deliveryGate(env, source, route).admit(
      control!,
      group.map((delivery) => ({ id: delivery.id, database })),
      now,
      options,
    );
    holds.set(name, new Map(answer.held.map(({ id, waitMs, reason }) => [id, { waitMs, reason }])));
    startAt.set(name, new Map(Object.entries(answer.startAt)));
  });
  await Promise.all(asks);
  return { holds, startAt };
}

/** Deliveries a gate woke with the slots a release freed, for the caller to send on at once. */
export interface WokenDeliveries {
  source: string;
  route: string;
  woken: GateDelivery[];
}

/** A route whose breaker just closed with `recover = "auto"`, and when its run of failures began. */
export interface RouteRecovery {
  source: string;
  route: string;
  failingSince: number;
}

/**
 * Frees the slots of finished attempts and tells each gate how its destination answered. Answers, per gate that woke
 * any, the deliveries given the freed slots (src/gate/decide.ts, `wake`), and the routes whose breaker closed again
 * with `recover = "auto"`, for the caller to start their recovery.
 */
export async function tellGates(
  env: Pick<Env, "DELIVERY_GATES">,
  finished: readonly (GatedDelivery & { verdict: AttemptVerdict })[],
  now: number,
): Promise<{ woken: WokenDeliveries[]; recoveries: RouteRecovery[] }> {
  const answers = await Promise.all(
    [...byRoute(finished)].map(async ([name, group]) => {
      const { source, route, control } = group[0]!;
      const { woken, recoverFrom } = await deliveryGate(env, source, route).release(
        control!,
        group.map(({ id, verdict }) => ({ id, verdict })),
        now,
        name,
      );
      return { source, route, woken, recoverFrom };
    }),
  );
  return {
    woken: answers
      .filter((answer) => answer.woken.length > 0)
      .map(({ source, route, woken }) => ({ source, route, woken })),
    recoveries: answers.flatMap(({ source, route, recoverFrom }) =>
      recoverFrom === null ? [] : [{ source, route, failingSince: recoverFrom }],
    ),
  };
}

/** The controlled deliveries, grouped by gate; uncontrolled ones are left out. */
function byRoute<T extends GatedDelivery>(deliveries: readonly T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const delivery of deliveries) {
    if (delivery.control === null) continue;
    const name = gateName(delivery.source, delivery.route);
    groups.set(name, [...(groups.get(name) ?? []), delivery]);
  }
  return groups;
}
