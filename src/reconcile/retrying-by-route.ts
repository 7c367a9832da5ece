import { sql } from "drizzle-orm";
import { batchByName } from "../db/batch";
import { database } from "../db/client";
import { deliveries, receipts } from "../db/schema";
import type { RetryingCount } from "../monitor/destination-failing";
import type { SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";

/**
 * Deliveries per (source, route) waiting for a retry after a failed attempt, over every receipt database, for the
 * "destination-failing" issues: the receipt's own delivery (receipts_retrying holds only rows with a next attempt
 * set) and each further route's unfinished row (deliveries_unfinished). Rows read are the backlog, never the
 * traffic; read once per cron run.
 */
export async function retryingByRoute(env: Env, sources: readonly SourceConfig[]): Promise<RetryingCount[]> {
  const routesOf = new Map(
    sources.map((source) => [
      source.name,
      new Map(source.routes.map((route) => [route.rules.name, route.rules.control?.breaker != null])),
    ]),
  );
  const firstRoute = new Map(sources.map((source) => [source.name, source.routes[0]?.rules.name ?? null]));
  const totals = new Map<string, RetryingCount>();
  const add = (source: string, route: string | null, retrying: number) => {
    const routes = routesOf.get(source);
    const name = route ?? firstRoute.get(source) ?? null;
    // A source or route no longer configured has no issue of its own.
    if (routes === undefined || name === null || !routes.has(name)) return;
    const key = `${source}\u0000${name}`;
    const seen = totals.get(key);
    totals.set(key, { source, route: name, retrying: (seen?.retrying ?? 0) + retrying, breaker: routes.get(name)! });
  };
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const db = database(databaseEnv);
    const read = await batchByName(db, {
      own: db.all<{ source: string; route: string | null; retrying: number }>(
        sql`SELECT source, route, COUNT(*) AS retrying FROM ${receipts} INDEXED BY receipts_retrying
          WHERE next_attempt_at IS NOT NULL AND status IN ('pending', 'processing') AND attempts > 0
            AND last_error IS NOT NULL GROUP BY source, route`,
      ),
      further: db.all<{ source: string; route: string; retrying: number }>(
        sql`SELECT r.source AS source, d.route AS route, COUNT(*) AS retrying
          FROM ${deliveries} AS d INDEXED BY deliveries_unfinished CROSS JOIN ${receipts} AS r
          WHERE d.next_attempt_at IS NOT NULL AND d.status IN ('pending', 'processing') AND r.id = d.receipt_id
            AND d.attempts > 0 AND d.last_error IS NOT NULL GROUP BY r.source, d.route`,
      ),
    });
    for (const row of [...read.own, ...read.further]) add(row.source, row.route, row.retrying);
  }
  return [...totals.values()];
}
