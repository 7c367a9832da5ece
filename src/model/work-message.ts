/**
 * What travels on the work queue: one message per relay batch, naming its receipts. Bodies stay in D1 (a message
 * is billed per 64 KB and caps at 128 KB); a batch of ids lets one message, one queue write, read and delete,
 * carry a whole relay batch.
 */
export interface WorkMessage {
  source: string;
  receiptIds: string[];
}

/** The shape sent before batching (one receipt per message): still accepted, so messages in flight at a deploy finish. */
export interface LegacyWorkMessage {
  receiptId: string;
}

export type QueuedWork = WorkMessage | LegacyWorkMessage;

export function receiptIdsOf(message: QueuedWork): string[] {
  return "receiptIds" in message ? message.receiptIds : [message.receiptId];
}
