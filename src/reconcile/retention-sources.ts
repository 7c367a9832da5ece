import { sql } from "drizzle-orm";
import type { Database } from "../db/client";
import type { SourceConfig } from "../sources/config";
import { databaseBindingIn } from "../sources/databases";
import { isPartitionDatabase } from "../sources/partitions";
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
  // A database of the receipt partitions is emptied whole when its turn comes round (partition-drop.ts): row by row
  // retention would write the very rows the drop saves.
  if (isPartitionDatabase(env, binding)) return [];
  const elsewhere = sources.filter((source) => source.database !== binding).map((source) => source.name);
  if (elsewhere.length === 0) return [...sources];
  const rows = await db.all<{ source: string }>(sql`
    SELECT asked.value AS source FROM json_each(${JSON.stringify(elsewhere)}) AS asked
    WHERE EXISTS (SELECT 1 FROM receipts WHERE receipts.source = asked.value)
       OR EXISTS (SELECT 1 FROM quarantine WHERE quarantine.source = asked.value)`);
  return sourcesRetainedIn(binding, sources, new Set(rows.map((row) => row.source)));
}
