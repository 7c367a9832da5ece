import { and, asc, eq, gte, inArray, isNull, lt, not, or, sql } from "drizzle-orm";
import { readCheckpoint } from "../db/checkpoints";
import { database } from "../db/client";
import { LATE_RELAY_MS, relayedLate } from "../db/late-relays";
import { receipts } from "../db/schema";
import { ulidFloor } from "../lib/ulid";

/**
 * Finding receipts that nobody attempted and whose queue message is gone, in the order they reached D1.
 *
 * Such a receipt looks exactly like one whose message is on its way (pending, no due time): the happy path writes
 * nothing between the relay and the commit, and any index that told the two apart would cost it a written row. So
 * they are found by reading, once each, every receipt in the order it reached D1, from a cursor that moves only past
 * receipts that are finished, due (a `next_attempt_at`, which the retry index watches), or re-driven here:
 *   - receipts relayed on time (within LATE_RELAY_MS of arrival) are read along the primary key, whose ULIDs are
 *     minted on arrival: the id range up to `ulidFloor(until)`, in pages whose statements return only the
 *     unfinished receipts (and the page's last id), so a page of 5,000 costs one D1 call and 5,000 rows read;
 *   - receipts relayed late are read through the partial index `receipts_late_relays`, by relay time: a receipt
 *     that reached D1 after the id cursor passed its id (an outage, a shard's back-off, a poison row ahead of it)
 *     is found there, however late it came. The happy path never writes that index.
 * A first attempt still holding a live lease is neither stuck nor finished: the cursor stops at it, so the next run
 * reads it again, by when its lease has run out or it has finished.
 */

export const STUCK_SCAN_CURSOR = "stuck-scan";
/** The previous scan's cursor, along the id only: a deployment that has it goes on from there. */
const FORMER_SCAN_CURSOR = "overdue-scan";
/** Rows of the primary key one page reads: one D1 call. */
export const STUCK_SCAN_PAGE_ROWS = 5_000;
/** Late relays returned per run (only unfinished ones are: the rest are read, not returned). */
const LATE_RELAYS_PER_RUN = 1_000;
/** Wall-clock a run may spend paging; it always reads at least one page. Left over waits for the next run. */
export const STUCK_SCAN_BUDGET_MS = 5_000;
/** Stuck receipts found per run at most: the rest wait for the next run (the cursor stops where this one did). */
export const STUCK_PER_RUN = 5_000;

/** Everything relayed on time with an id below `idFrom`, and every late relay before `lateFrom`, has been dealt with. */
export interface StuckScanCursor {
  idFrom: string;
  lateFrom: number;
}

export interface UnfinishedReceipt {
  receiptId: string;
  source: string;
  status: string;
  leaseUntil: number | null;
}

/** A never-attempted or abandoned receipt is re-driven; a first attempt under a live lease is waited for. */
export function stuckVerdict(row: UnfinishedReceipt, now: number): "redrive" | "wait" {
  if (row.status === "processing" && row.leaseUntil !== null && row.leaseUntil >= now) return "wait";
  return "redrive";
}

export interface StuckScan {
  stuck: UnfinishedReceipt[];
  /** Where the next run starts; null when nothing moved. */
  next: StuckScanCursor | null;
}

/**
 * Reads receipts that reached D1 before `until` (epoch ms, D1's clock for relay times) and are still unfinished with
 * no due time, from the stored cursor on. The caller re-drives `stuck` and then writes `next`.
 */
export async function scanForStuck(
  env: Env,
  now: number,
  until: number,
  budgetMs = STUCK_SCAN_BUDGET_MS,
): Promise<StuckScan> {
  const db = database(env);
  const stored = await readCheckpoint<StuckScanCursor>(env, "*", STUCK_SCAN_CURSOR);
  const former = stored ? null : await readCheckpoint<{ after: string }>(env, "*", FORMER_SCAN_CURSOR);
  const from: StuckScanCursor = stored ?? { idFrom: former?.after ?? "", lateFrom: 0 };
  const stuck = new Map<string, UnfinishedReceipt>();
  const unfinished = and(inArray(receipts.status, ["pending", "processing"]), isNull(receipts.nextAttemptAt));

  // Late relays first: few, and each found here is skipped below.
  const late = await db
    .select({
      receiptId: receipts.receiptId,
      source: receipts.source,
      status: receipts.status,
      leaseUntil: receipts.leaseUntil,
      relayedAt: receipts.relayedAt,
    })
    .from(receipts)
    .where(and(relayedLate, gte(receipts.relayedAt, from.lateFrom), lt(receipts.relayedAt, until), unfinished))
    .orderBy(asc(receipts.relayedAt))
    .limit(LATE_RELAYS_PER_RUN);
  let lateFrom = late.length === LATE_RELAYS_PER_RUN ? late.at(-1)!.relayedAt! : until;
  for (const row of late) {
    if (stuckVerdict(row, now) === "redrive") stuck.set(row.receiptId, row);
    else lateFrom = Math.min(lateFrom, row.relayedAt!);
  }

  const idUntil = ulidFloor(until);
  let idFrom = from.idFrom;
  let waitingFrom: string | null = null;
  const deadline = Date.now() + budgetMs;
  let more = true;
  do {
    const page = db
      .select({
        receiptId: receipts.receiptId,
        source: receipts.source,
        status: receipts.status,
        nextAttemptAt: receipts.nextAttemptAt,
        leaseUntil: receipts.leaseUntil,
        receivedAt: receipts.receivedAt,
        relayedAt: receipts.relayedAt,
      })
      .from(receipts)
      .where(and(gte(receipts.receiptId, idFrom), lt(receipts.receiptId, idUntil)))
      .orderBy(asc(receipts.receiptId))
      .limit(STUCK_SCAN_PAGE_ROWS)
      .as("page");
    const counted = db
      .select({
        receiptId: page.receiptId,
        source: page.source,
        status: page.status,
        nextAttemptAt: page.nextAttemptAt,
        leaseUntil: page.leaseUntil,
        receivedAt: page.receivedAt,
        relayedAt: page.relayedAt,
        pageEnd: sql<string>`max(${page.receiptId}) OVER ()`.as("page_end"),
        pageRows: sql<number>`count(*) OVER ()`.as("page_rows"),
      })
      .from(page)
      .as("counted");
    const candidate = and(
      inArray(counted.status, ["pending", "processing"]),
      isNull(counted.nextAttemptAt),
      // A late relay not yet `until` old is the late scan's, in a later run: its message may still be on its way.
      not(and(sql`${counted.relayedAt} > ${counted.receivedAt} + ${LATE_RELAY_MS}`, gte(counted.relayedAt, until))!),
    )!;
    // Only the page's unfinished receipts come back, and its last row (for where the page ended).
    const rows = await db
      .select({
        receiptId: counted.receiptId,
        source: counted.source,
        status: counted.status,
        leaseUntil: counted.leaseUntil,
        pageEnd: counted.pageEnd,
        pageRows: counted.pageRows,
        candidate: sql<number>`${candidate}`,
      })
      .from(counted)
      .where(or(candidate, eq(counted.receiptId, counted.pageEnd)));
    if (rows.length === 0) break;
    for (const row of rows) {
      if (!row.candidate) continue;
      if (stuckVerdict(row, now) === "redrive") stuck.set(row.receiptId, row);
      else if (waitingFrom === null || row.receiptId < waitingFrom) waitingFrom = row.receiptId;
    }
    // Inclusive: the next page reads the last row again (one row), which saves minting "the id after this one".
    idFrom = rows[0]!.pageEnd;
    more = rows[0]!.pageRows === STUCK_SCAN_PAGE_ROWS;
  } while (more && Date.now() < deadline && stuck.size < STUCK_PER_RUN);
  if (waitingFrom !== null && waitingFrom < idFrom) idFrom = waitingFrom;

  const next = { idFrom, lateFrom };
  const moved = next.idFrom !== from.idFrom || next.lateFrom !== from.lateFrom || stored === null;
  return { stuck: [...stuck.values()], next: moved ? next : null };
}
