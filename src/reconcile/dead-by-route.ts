import { sql } from "drizzle-orm";
import { batchByName } from "../db/batch";
import { database } from "../db/client";
import { deliveries, receipts } from "../db/schema";
import type { SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";

/**
 * Dead deliveries per (source, route) over every receipt database, for the "dead-letters" issues: the receipt's own
 * delivery (its row's `route`, null for the source's first route) and each further route's row in `deliveries`.
 * Read once per cron run through the partial indexes that hold only dead rows: rows read are the dead letters,
 * never the traffic.
 */
export async function deadLettersByRoute(
  env: Env,
  sources: readonly SourceConfig[],
): Promise<{ source: string; route: string; dead: number }[]> {
  const firstRoute = new Map(sources.map((source) => [source.name, source.routes[0]?.rules.name ?? null]));
  const totals = new Map<string, { source: string; route: string; dead: number }>();
  const add = (source: string, route: string | null, dead: number) => {
    // A source no longer configured has no issue of its own; its dead letters are still on the dead-letter pages.
    if (!firstRoute.has(source)) return;
    const name = route ?? firstRoute.get(source) ?? null;
    if (name === null) return;
    const key = `${source}\u0000${name}`;
    const seen = totals.get(key);
    totals.set(key, { source, route: name, dead: (seen?.dead ?? 0) + dead });
  };
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const db = database(databaseEnv);
    const read = await batchByName(db, {
      own: db.all<{ source: string; route: string | null; dead: number }>(
        sql`SELECT source, route, COUNT(*) AS dead FROM ${receipts} INDEXED BY receipts_dead
          WHERE status = 'dead' GROUP BY source, route`,
      ),
      further: db.all<{ source: string; route: string; dead: number }>(
        sql`SELECT r.source AS source, d.route AS route, COUNT(*) AS dead FROM ${deliveries} AS d INDEXED BY deliveries_dead
          CROSS JOIN ${receipts} AS r WHERE r.id = d.receipt_id AND d.status = 'dead' GROUP BY r.source, d.route`,
      ),
    });
    for (const row of [...read.own, ...read.further]) add(row.source, row.route, row.dead);
  }
  return [...totals.values()];
}
