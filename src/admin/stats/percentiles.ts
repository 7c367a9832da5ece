import { type SQL, sql } from "drizzle-orm";
import type { Database } from "../../db/client";

export interface Percentiles {
  samples: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
}

export const NO_SAMPLES: Percentiles = { samples: 0, p50: null, p95: null, p99: null, max: null };

/**
 * Nearest-rank percentiles per group in one query. SQLite has no percentile function, so each value is ranked
 * within its group and the smallest value at or past each rank is taken. `values` must select two columns,
 * `grp` (the group's key, text) and `value`; rows whose value is NULL are left out.
 *
 * @example
 *   const pickup = await percentilesByGroup(db, sql`SELECT source AS grp, started - received AS value FROM …`);
 *   pickup.get("stripe")?.p99;
 */
export async function percentilesByGroup(db: Database, values: SQL): Promise<Map<string, Percentiles>> {
  const rows = await db.all<{ grp: string; samples: number; p50: number; p95: number; p99: number; max: number }>(sql`
    WITH ranked AS (
      SELECT grp, value,
        ROW_NUMBER() OVER (PARTITION BY grp ORDER BY value) AS rank,
        COUNT(*) OVER (PARTITION BY grp) AS samples
      FROM (${values}) WHERE value IS NOT NULL
    )
    SELECT grp, MAX(samples) AS samples,
      MIN(CASE WHEN rank >= 0.50 * samples THEN value END) AS p50,
      MIN(CASE WHEN rank >= 0.95 * samples THEN value END) AS p95,
      MIN(CASE WHEN rank >= 0.99 * samples THEN value END) AS p99,
      MAX(value) AS max
    FROM ranked GROUP BY grp`);
  return new Map(
    rows.map((row) => [
      String(row.grp),
      { samples: row.samples, p50: row.p50, p95: row.p95, p99: row.p99, max: row.max },
    ]),
  );
}
