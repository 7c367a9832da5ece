import { database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { receipts } from "../db/schema";

/**
 * Which database holds each receipt: one primary-key read per database, all at once. For the paths where a
 * receipt is not where they looked first (a by-id admin action, a consumer whose message predates its source's
 * move), never for the happy path, which reads the one database its message names.
 *
 * @returns receipt id → binding of the first database, in `databases` order, that holds it; ids none holds are
 * left out. (An id in two databases cannot be minted, ids being ULIDs, but if it were the first would answer.)
 */
export async function receiptHolders(
  databases: readonly { binding: string; env: Pick<Env, "DB"> }[],
  receiptIds: readonly string[],
): Promise<Map<string, string>> {
  const holders = new Map<string, string>();
  if (receiptIds.length === 0) return holders;
  const held = await Promise.all(
    databases.map(async ({ binding, env }) => {
      const rows = await database(env)
        .select({ receiptId: receipts.receiptId })
        .from(receipts)
        .where(inJsonList(receipts.receiptId, receiptIds));
      return { binding, receiptIds: rows.map((row) => row.receiptId) };
    }),
  );
  for (const { binding, receiptIds: found } of held) {
    for (const receiptId of found) if (!holders.has(receiptId)) holders.set(receiptId, binding);
  }
  return holders;
}
