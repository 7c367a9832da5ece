import { asc, eq } from "drizzle-orm";
import type { Database } from "../../db/client";
import { deliveries } from "../../db/schema";

/**
 * Each route's outcome for one receipt (docs/processing.md, "Deliveries"): the route the receipt row carries (its
 * status is the receipt's), every further delivery from its own row, and every route the filter turned away. A
 * one-route source's receipt lists its one route. The `summary` is the receipt's status across them: dead if any
 * delivery is dead, in flight while any is pending or processing, else the receipt's own.
 */

export interface RouteOutcome {
  route: string | null;
  status: string;
  attempts: number;
  lastError: string | null;
  httpStatus: number | null;
  nextAttemptAt: number | null;
  replayCount: number;
}

export async function routeOutcomes(
  db: Database,
  receipt: {
    receiptId: string;
    route: string | null;
    filteredRoutes: string | null;
    status: string;
    attempts: number;
    lastError: string | null;
    nextAttemptAt: number | null;
    replayCount: number;
  },
  attemptHttpStatus: number | null,
): Promise<{ routes: RouteOutcome[]; summary: string }> {
  const further =
    receipt.filteredRoutes === null
      ? []
      : await db
          .select()
          .from(deliveries)
          .where(eq(deliveries.receiptId, receipt.receiptId))
          .orderBy(asc(deliveries.route));
  const own: RouteOutcome[] =
    receipt.route === null && receipt.filteredRoutes !== null
      ? []
      : [
          {
            route: receipt.route,
            status: receipt.status,
            attempts: receipt.attempts,
            lastError: receipt.lastError,
            httpStatus: attemptHttpStatus,
            nextAttemptAt: receipt.nextAttemptAt,
            replayCount: receipt.replayCount,
          },
        ];
  const routes = [
    ...own,
    ...further.map((row) => ({
      route: row.route,
      status: row.status,
      attempts: row.attempts,
      lastError: row.lastError,
      httpStatus: row.httpStatus,
      nextAttemptAt: row.nextAttemptAt,
      replayCount: row.replayCount,
    })),
    ...(receipt.filteredRoutes ? receipt.filteredRoutes.split(",") : []).map((route) => ({
      route,
      status: "filtered out",
      attempts: 0,
      lastError: null,
      httpStatus: null,
      nextAttemptAt: null,
      replayCount: 0,
    })),
  ];
  return {
    routes,
    summary: summaryOf(
      receipt.status,
      routes.map((outcome) => outcome.status),
    ),
  };
}

function summaryOf(own: string, statuses: readonly string[]): string {
  if (statuses.includes("dead")) return "dead";
  if (statuses.some((status) => status === "pending" || status === "processing"))
    return statuses.includes("processing") ? "processing" : "pending";
  return own;
}
