import { and, eq, isNull } from "drizzle-orm";
import { database } from "../../db/client";
import { receipts } from "../../db/schema";
import { prepare } from "../../db/statement-template";
import { logEvent } from "../../lib/log";
import { meteredD1 } from "../../lib/meter";
import { type FannedOut, furtherDeliveryStatements } from "../commit/delivery-rows";
import { abortUnlessChanged, batchUnlessEmpty } from "../commit/statements";
import type { ReceiptForWork } from "../load/load";
import { sendDeliveryRetries } from "./delivery-retries";

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
 * the receipt's update is guarded (`fanOutUnwritten`) and aborts its batch otherwise. Each written delivery then goes
 * on its own message, naming its route, due at once; should that send fail, the cron's re-drive finds the row.
 *
 * A batch that fails is told apart by reading the receipt's row, never by the error's text (as commit.ts does): no
 * longer unwritten, its guard aborted it, because another run wrote the fan-out (or leased the receipt for a whole
 * first attempt, which writes it with its commit), and it is skipped; still unwritten, D1 failed, and the error goes
 * up so the consumer's message is retried with nothing written.
 */
export async function writeHeldFanOuts(env: Env, held: readonly HeldFanOut[]): Promise<void> {
  if (held.length === 0) return;
  const d1 = meteredD1(env.DB);
  const written: HeldFanOut[] = [];
  try {
    if (held.length === 1) {
      if (await writeAlone(env, d1, held[0]!)) written.push(held[0]!);
      return;
    }
    try {
      await batchUnlessEmpty(
        d1,
        held.flatMap((one) => heldFanOutStatements(d1, one)),
      );
      written.push(...held);
      return;
    } catch {
      // One of them was fanned out by another run, or D1 failed: each on its own says which.
    }
    for (const one of held) if (await writeAlone(env, d1, one)) written.push(one);
  } finally {
    // Those written before a failure still go: the consumer's retry finds their fan-out done and sends them nothing.
    await sendDeliveryRetries(env, written);
  }
}

/** Writes one event's held fan-out; false when another run had written it (its guard aborted the batch). */
async function writeAlone(env: Env, d1: D1Database, one: HeldFanOut): Promise<boolean> {
  try {
    await batchUnlessEmpty(d1, heldFanOutStatements(d1, one));
    return true;
  } catch (failure) {
    if (await isUnwritten(env, one.receipt.receiptId)) throw failure;
    logEvent("fan_out.held_written_elsewhere", { receipt: one.receipt.receiptId });
    return false;
  }
}

/** The guard of a held fan-out: the receipt still pending, uncommitted, and its fan-out not yet written. */
function fanOutUnwritten(receiptId: string) {
  return and(
    eq(receipts.receiptId, receiptId),
    eq(receipts.status, "pending"),
    isNull(receipts.committedAt),
    isNull(receipts.filteredRoutes),
  );
}

async function isUnwritten(env: Env, receiptId: string): Promise<boolean> {
  const [row] = await database(env)
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(fanOutUnwritten(receiptId));
  return row !== undefined;
}

function heldFanOutStatements(d1: D1Database, { receipt, fanOut }: HeldFanOut): D1PreparedStatement[] {
  const routes = database({ DB: d1 })
    .update(receipts)
    .set({ route: fanOut.route, filteredRoutes: fanOut.filtered.join(",") })
    .where(fanOutUnwritten(receipt.receiptId));
  return [prepare(d1, routes), abortUnlessChanged(d1), ...furtherDeliveryStatements(d1, receipt.receiptId, fanOut)];
}
