/**
 * A delivery that batches events under one signature (SendGrid's event array) is claimed as one event, deduped by
 * its bytes. So that the audit can still find it by any item's own id, the item ids ride in the receipt's kept
 * headers as one space-separated annotation, which the admin API's `itemId` filter matches token by token. No index
 * and no extra row: the ids live in the row the happy path writes anyway. Adyen signs each item on its own, so each
 * item is its own receipt (src/providers/adyen.ts), annotated with its own id alone: one `itemId` filter for both.
 */

export const BATCH_ITEM_IDS = "batch-item-ids";
/** Item ids kept per delivery; a larger batch keeps the first this many (the count says how many there were). */
export const MAX_BATCH_ITEM_IDS = 1000;
/** An item id is one printable token (no spaces, so the list splits unambiguously). */
const ITEM_ID = /^[\x21-\x7e]{1,128}$/;

/** `batch-items` (how many items the delivery held) and `batch-item-ids` (their ids, distinct, in order). */
export function batchItemAnnotations(itemCount: number, ids: readonly unknown[]): Record<string, string> {
  const distinct = [...new Set(ids.filter((id): id is string => typeof id === "string" && ITEM_ID.test(id)))].slice(
    0,
    MAX_BATCH_ITEM_IDS,
  );
  return distinct.length > 0
    ? { "batch-items": String(itemCount), [BATCH_ITEM_IDS]: distinct.join(" ") }
    : { "batch-items": String(itemCount) };
}
