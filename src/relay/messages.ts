/** What travels on the work queue: only the receipt's id. The body stays in D1 (queue messages cap at 128 KB). */
export interface WorkMessage {
  receiptId: string;
}
