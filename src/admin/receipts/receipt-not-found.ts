import { type ApiError, apiError } from "../../lib/errors";
import { ulidTime } from "../../lib/ulid";
import { archivePrefix } from "../../reconcile/partition-archive";
import { partitionDatabaseOf, periodOf, receiptPartitionsOf } from "../../sources/partitions";

/**
 * The 404 for a receipt id no database holds. A partitioned source's receipt past the ring's SQL window (`keep`) is
 * not lost: its partition was archived to R2 and emptied, and its id alone names the archive (the database and period
 * it was written in). One R2 list, on this path only, tells an archived period from an id nothing ever held.
 */
export async function receiptNotFound(env: Env, receiptId: string): Promise<ApiError> {
  const parsed = receiptPartitionsOf(env);
  if (parsed.ok && parsed.partitions && env.BODIES) {
    const ring = parsed.partitions;
    const prefix = archivePrefix(
      partitionDatabaseOf(ring, receiptId),
      periodOf(ring, ulidTime(receiptId)) * ring.periodMs,
    );
    const listed = await env.BODIES.list({ prefix, limit: 1 });
    if (listed.objects.length > 0)
      return apiError(
        404,
        "receipt_archived",
        `No database holds this receipt any more: if a partitioned source received it, it is past RECEIPT_PARTITIONS.keep and archived in the BODIES bucket under ${prefix} (NDJSON, docs/operating.md "Receipts in time partitions").`,
      );
  }
  return apiError(404, "receipt_not_found", "No receipt has this id.");
}
