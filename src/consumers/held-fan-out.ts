import { and, eq, isNull } from "drizzle-orm";
import { database } from "../db/client";
import { receipts } from "../db/schema";
import { logEvent } from "../lib/log";
import { meteredD1 } from "../lib/meter";
import { sendDeliveryRetries } from "./deliveries";
import { type FannedOut, furtherDeliveryStatements } from "./delivery-rows";
import type { ReceiptForWork } from "./load";
import { ABORT_UNLESS_CHANGED, batchUnlessEmpty, prepare } from "./statements";

/**
 * Writing the fan-out of an event whose own route's gate held its first consumption (fan-out.ts, `heldFanOut`), so
 * the further routes go now and the held route waits alone (docs/processing.md, "Deliveries"). Only a held event
 * gets here: the happy path writes its fan-out with its attempt's commit and pays nothing for this.
 */

interface HeldFanOut {
  receipt: ReceiptForWork;
  fanOut: FannedOut;
}

/**
 * The receipt's routes, then every further delivery's row, in one batch per D1 call. Written once, as any fan-out:
 * the receipt's update is guarded by `filtered_routes IS NULL` (and by the receipt still pending: a consumer that
 * leased it for a whole first attempt since, sending to every route, writes the fan-out itself) and aborts its batch
 * otherwise. Each written delivery then goes on its own message, naming its route, due at once; should that send
 * fail, the cron's re-drive finds the row.
 */
export async function writeHeldFanOuts(env: Env, held: readonly HeldFanOut[]): Promise<void> {
  if (held.length === 0) return;
  const d1 = meteredD1(env.DB);
  let written = [...held];
  try {
    await batchUnlessEmpty(
      d1,
      held.flatMap((one) => heldFanOutStatements(d1, one)),
    );
  } catch {
    // One of them was fanned out by another run (or D1 failed): each on its own.
    written = [];
    for (const one of held) {
      try {
        await batchUnlessEmpty(d1, heldFanOutStatements(d1, one));
        written.push(one);
      } catch {
        // Not written: the fan-out is another run's, or it is decided again when the held delivery comes back.
        logEvent("fan_out.held_not_written", { receipt: one.receipt.receiptId });
      }
    }
  }
  await sendDeliveryRetries(env, written);
}

function heldFanOutStatements(d1: D1Database, { receipt, fanOut }: HeldFanOut): D1PreparedStatement[] {
  const routes = database({ DB: d1 })
    .update(receipts)
    .set({ route: fanOut.route, filteredRoutes: fanOut.filtered.join(",") })
    .where(
      and(
        eq(receipts.receiptId, receipt.receiptId),
        eq(receipts.status, "pending"),
        isNull(receipts.committedAt),
        isNull(receipts.filteredRoutes),
      ),
    );
  return [
    prepare(d1, routes),
    prepare(d1, ABORT_UNLESS_CHANGED),
    ...furtherDeliveryStatements(d1, receipt.receiptId, fanOut),
  ];
}
