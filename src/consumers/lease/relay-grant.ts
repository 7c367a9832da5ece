import type { ReceiptForWork } from "../load/load";

/**
 * The relay's grant of a receipt's first lease (docs/processing.md, "Leases"). The relay's own message (WorkMessage
 * `relayGrant`), on its first delivery, carries generation 1 of every receipt it names that nothing has touched
 * since: its consumer runs that first attempt as the holder of generation 1 without writing a lease row, which saves
 * a forward's first attempt one D1 row. The grant is no row and has no expiry: a message that waits in a backed-up
 * queue holds it as long as it waits.
 *
 * It is fenced by the receipt's own columns, never by time. Any other consumer (a redelivery, the cron's re-drive, a
 * replay, a retry) takes a real lease, which moves `lease_generation` on from 0; the granted attempt then finds its
 * receipt changed and its failure writes nothing (its fenced update wants generation 0), and its success can commit
 * only while `committed_at` is unset, as every attempt's (invariant 4). A granted attempt that dies is counted by
 * nobody: its message comes back redelivered, and that delivery leases and counts each receipt (message-facts.ts inSlices).
 */
export function holdsRelayGrant(
  receipt: Pick<ReceiptForWork, "status" | "leaseGeneration" | "attempts" | "committedAt" | "nextAttemptAt">,
): boolean {
  return (
    receipt.status === "pending" &&
    receipt.leaseGeneration === 0 &&
    receipt.attempts === 0 &&
    receipt.committedAt === null &&
    receipt.nextAttemptAt === null
  );
}
