import type { DeadReceiptFilter } from "../../replay/replay-receipts";

/** What an operator action acted on, in words, for the audit log's `target`: short, and never a body or a secret. */

/** A list of receipts: the one id, or how many (the ids were in the request; the log keeps it short). */
export function receiptsTarget(receiptIds: readonly string[], route?: string): string {
  const receipts = receiptIds.length === 1 ? `receipt ${receiptIds[0]}` : `${receiptIds.length} receipts`;
  return route === undefined ? receipts : `${receipts}, route ${route}`;
}

/** A bulk replay's filter. */
export function filterTarget(filter: DeadReceiptFilter, route: string | undefined): string {
  const parts = [
    filter.source === undefined ? "all sources" : `source ${filter.source}`,
    route === undefined ? null : `route ${route}`,
    filter.eventType === undefined ? null : `type ${filter.eventType}`,
    filter.receivedFrom === undefined ? null : `since ${new Date(filter.receivedFrom).toISOString()}`,
    filter.receivedBefore === undefined ? null : `until ${new Date(filter.receivedBefore).toISOString()}`,
  ];
  return parts.filter((part) => part !== null).join(", ");
}

/** A route of a source (pause, resume). */
export function routeTarget(source: string, route: string): string {
  return `source ${source}, route ${route}`;
}
