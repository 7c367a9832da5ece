import { sql } from "drizzle-orm";
import type { Database } from "../db/client";
import type { SourceConfig } from "../sources/config";
import { databaseBindingIn } from "../sources/databases";
import { sourcesRetainedIn } from "./retention-scan";

/**
 * Which sources retention visits in the database `env` points at (retention-scan.ts `sourcesRetainedIn`): those
 * that live there, and those that moved away but still have receipts or quarantine there. The second is one read,
 * only when some configured source lives elsewhere: per such source, a seek on the (source, …) index of `receipts`
 * and of `quarantine`, which finds nothing for one that never lived here (or whose rows there have all expired).
 */
export async function sourcesToRetain(
  env: object,
  db: Database,
  sources: readonly SourceConfig[],
): Promise<SourceConfig[]> {
  const binding = databaseBindingIn(env);
  const elsewhere = sources.filter((source) => source.database !== binding).map((source) => source.name);
  if (elsewhere.length === 0) return [...sources];
  const rows = await db.all<{ source: string }>(sql`
    SELECT asked.value AS source FROM json_each(${JSON.stringify(elsewhere)}) AS asked
    WHERE EXISTS (SELECT 1 FROM receipts WHERE receipts.source = asked.value)
       OR EXISTS (SELECT 1 FROM quarantine WHERE quarantine.source = asked.value)`);
  return sourcesRetainedIn(binding, sources, new Set(rows.map((row) => row.source)));
}
