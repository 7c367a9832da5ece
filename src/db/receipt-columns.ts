import { receipts } from "./schema";

/**
 * The event a receipt holds, as its sender identified it (src/providers/types.ts, EventIdentity): the columns
 * every reader of receipts starts from, the admin's summaries and the consumer's load alike.
 */
export const receiptEventColumns = {
  receiptId: receipts.receiptId,
  source: receipts.source,
  eventKey: receipts.eventKey,
  eventType: receipts.eventType,
  subjectId: receipts.subjectId,
  version: receipts.version,
};
