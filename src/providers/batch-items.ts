/**
 * Deliveries that batch several events (SendGrid's event array, Adyen's notificationItems) are claimed as one
 * delivery, deduped by the whole batch (SendGrid's by its bytes, Adyen's by its items' signed keys). So that the
 * audit can still find a delivery by any item's own id, the item ids ride in the receipt's kept headers as one
 * space-separated annotation, which the admin API's `itemId` filter matches token by token. No index and no extra
 * row: the ids live in the row the happy path writes anyway.
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
