import type { ForwardSeen } from "./forward-backend.ts";
import type { SourceSettings } from "./setup.ts";
import type { ReceiptStore } from "./store.ts";
import type { Workload } from "./workload.ts";

/**
 * A source with several routes for the bench (docs/routing.md, "Fan-out"), after the routing doc's example: every
 * event to the ledger handler and to the backend, and to an audit route only when its filter matches. The two
 * forwards reach the bench's forward backend (forward-backend.ts) on a path each, so each route's deliveries are
 * counted apart: by the handler's effect in D1 for the ledger, by what the backend received for the forwards.
 */

export const FAN_OUT_SOURCE = "bench-fanout";

export const FAN_OUT_ROUTES = ["ledger", "backend", "audit"] as const;

/** The forward routes and the backend path each forwards to. */
const FORWARD_PATHS: Record<string, string> = { backend: "/backend", audit: "/audit" };

/**
 * The fan-out source's table. `auditType` is the one event type the audit route takes: `account.credited` in the
 * simulation (plan changes are filtered out of it), a type no event has in the meters phase (filtered out always).
 */
export function fanOutSource(backendPort: number, auditType: string): SourceSettings {
  const backend = `http://127.0.0.1:${backendPort}`;
  return {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    type_path: "type",
    subject_path: "data.account",
    version_path: "data.version",
    routes: [
      { name: "ledger", destination: "handler:accounts" },
      { name: "backend", destination: `${backend}${FORWARD_PATHS.backend}` },
      { name: "audit", destination: `${backend}${FORWARD_PATHS.audit}`, filter: { type: auditType } },
    ],
  };
}

/** Which events a route of `fanOutSource(…, auditType)` takes: every route all of them, the audit route one type. */
export function routeTakes(auditType: string): (route: string, eventType: string) => boolean {
  return (route, eventType) => route !== "audit" || eventType === auditType;
}

/** One forward route's deliveries, counted from what the backend received, against what its filter lets through. */
export interface RouteCount {
  route: string;
  /** Events the route's filter matches: each must reach the destination once. */
  expected: number;
  /** Events the destination received (a resend of one delivery id counts once: the backend dedupes by it). */
  received: number;
  /** Expected events it never received. */
  lost: number;
  /** Events it received under more than one delivery id: two effects at a backend that dedupes by Idempotency-Key. */
  duplicateEffects: number;
  /** Events its filter turns away that reached it anyway. */
  unexpected: number;
  /** Requests past the first per delivery id (at-least-once resends, deduped by the key: not a fault). */
  resends: number;
  /** The route's `deliveries` rows by status (further routes), read back from D1. */
  rows: Record<string, number>;
}

/**
 * Every forward route's count for the run's events (`keyPrefix`), read from the backend's log and the receiver's
 * D1. `matches` says which events a route's filter takes.
 */
export function forwardRouteCounts(
  store: ReceiptStore,
  workload: Workload,
  seen: readonly ForwardSeen[],
  keyPrefix: string,
  matches: (route: string, eventType: string) => boolean,
): RouteCount[] {
  const eventTypes = new Map(
    workload.events.map((event) => [
      event.eventKey,
      event.kind === "credit" ? "account.credited" : "account.plan_changed",
    ]),
  );
  const rowsByRoute = store.read(
    (database) =>
      database
        .prepare(
          `SELECT d.route AS route, d.status AS status, COUNT(*) AS count FROM deliveries d
           JOIN receipts r ON r.id = d.receipt_id
           WHERE r.source = ?1 AND r.event_key LIKE ?2 GROUP BY d.route, d.status`,
        )
        .all(FAN_OUT_SOURCE, `${keyPrefix}%`) as Array<{ route: string; status: string; count: number }>,
  );
  return Object.entries(FORWARD_PATHS).map(([route, path]) => {
    const requestsByDelivery = new Map<string, number>();
    const deliveriesByEvent = new Map<string, Set<string>>();
    for (const forward of seen) {
      if (forward.path !== path || !forward.eventKey.startsWith(keyPrefix)) continue;
      requestsByDelivery.set(forward.idempotencyKey, (requestsByDelivery.get(forward.idempotencyKey) ?? 0) + 1);
      const ids = deliveriesByEvent.get(forward.eventKey) ?? new Set<string>();
      ids.add(forward.idempotencyKey);
      deliveriesByEvent.set(forward.eventKey, ids);
    }
    let expected = 0;
    let lost = 0;
    let unexpected = 0;
    for (const [eventKey, eventType] of eventTypes) {
      const wanted = matches(route, eventType);
      const got = deliveriesByEvent.has(eventKey);
      if (wanted) expected++;
      if (wanted && !got) lost++;
      if (!wanted && got) unexpected++;
    }
    return {
      route,
      expected,
      received: deliveriesByEvent.size,
      lost,
      duplicateEffects: [...deliveriesByEvent.values()].filter((ids) => ids.size > 1).length,
      unexpected,
      resends: [...requestsByDelivery.values()].reduce((sum, count) => sum + count - 1, 0),
      rows: Object.fromEntries(
        rowsByRoute.filter((row) => row.route === route).map(({ status, count }) => [status, count]),
      ),
    };
  });
}

/** What "correct" means for a forward route: every matched event received once, nothing filtered out received. */
export function routeProblems(count: RouteCount): string[] {
  const problems: string[] = [];
  if (count.lost !== 0) problems.push(`route ${count.route}: ${count.lost} events lost`);
  if (count.duplicateEffects !== 0)
    problems.push(`route ${count.route}: ${count.duplicateEffects} events received under two delivery ids`);
  if (count.unexpected !== 0) problems.push(`route ${count.route}: ${count.unexpected} filtered-out events received`);
  const unfinished = Object.entries(count.rows)
    .filter(([status]) => status !== "processed")
    .reduce((sum, [, rows]) => sum + rows, 0);
  if (unfinished !== 0) problems.push(`route ${count.route}: ${unfinished} deliveries not processed`);
  const rows = Object.values(count.rows).reduce((sum, value) => sum + value, 0);
  if (rows !== count.expected)
    problems.push(`route ${count.route}: ${rows} deliveries rows for ${count.expected} events`);
  return problems;
}

export function formatRouteCounts(counts: readonly RouteCount[]): string {
  const widths = [10, 10, 10, 6, 13, 12, 9];
  const line = (cells: Array<string | number>) =>
    cells
      .map((cell, index) => (index === 0 ? String(cell).padEnd(widths[0]!) : String(cell).padStart(widths[index]!)))
      .join("");
  return [
    `${line(["route", "expected", "received", "lost", "dup effects", "unexpected", "resends"])}  deliveries rows`,
    ...counts.map(
      (count) =>
        line([
          count.route,
          count.expected,
          count.received,
          count.lost,
          count.duplicateEffects,
          count.unexpected,
          count.resends,
        ]) +
        `  ${
          Object.entries(count.rows)
            .map(([status, rows]) => `${status} ${rows}`)
            .join(", ") || "none"
        }`,
    ),
  ].join("\n");
}
