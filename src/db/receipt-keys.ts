import { and, eq, type SQL } from "drizzle-orm";
import { inJsonList } from "./id-list";
import { KEY_INDEXED, receipts } from "./schema";

/**
 * Receipts of `source` under any of `eventKeys`, as the (source, event_key) index holds them: one seek per key,
 * never a scan. The index is partial (migrations/0023): a shard-arbitrated receipt (a partitioned source's, whose
 * claim shard alone holds its key) is not in it and is found through its shard instead (src/claims/key-lookup.ts).
 * Without the index's own condition SQLite would not use it, and every lookup by key would read the table.
 */
export function underIndexedKeys(source: string, eventKeys: readonly string[]): SQL {
  return and(KEY_INDEXED, eq(receipts.source, source), inJsonList(receipts.eventKey, eventKeys))!;
}
