/**
 * @module What "attempts" and "received → finished" mean for a receipt, replays included: one definition, read by
 * the receipts list, the receipt detail (admin API, dashboard, `show`) and the overview's latency (docs/operating.md,
 * "Attempts and latency").
 *
 * - attempts: every attempt the receipt ever had, replays included, as the timeline numbers them (the highest
 *   attempt number: each attempt takes the next lease generation, and an attempt row is numbered past it when it
 *   took none). receipts.attempts is only the current run's retry budget, which a replay resets.
 * - attempts since the last replay: those that started at or after it; a secondary figure, for a replayed receipt.
 * - received → finished: the first run's, from receipt to the end of the run the delivery itself started, when that
 *   run finished well (processed, stale, skipped). A replay is a run of its own, replayed → finished, reported as
 *   such and never folded into the first.
 */
import { sql } from "drizzle-orm";
import { attempts, receipts } from "./schema";

/** Statuses a run finishes well with: processed_at is then when it finished. */
export const FINISHED_WELL = ["processed", "stale", "skipped"] as const;
const FINISHED_WELL_SQL = FINISHED_WELL.map((status) => `'${status}'`).join(", ");
const isFinishedWell = (status: string | null) => (FINISHED_WELL as readonly (string | null)[]).includes(status);

/** attempts (ever), over the receipts table: its lease generation and a MAX over the attempts primary key. */
export const ATTEMPTS_EVER = sql<number>`MAX(${receipts.leaseGeneration}, COALESCE((SELECT MAX(${attempts.attemptNumber}) FROM ${attempts} WHERE ${attempts.receiptId} = ${receipts.receiptId}), 0))`;

/**
 * When the first run finished well, over `receipts r`: processed_at until a replay overwrites it, then what replay 1
 * kept of it (replays.previous_processed_at, by primary key). Null when that run went dead or is not known.
 */
export const FIRST_FINISH_SQL = `(CASE WHEN r.replay_count = 0
    THEN (CASE WHEN r.status IN (${FINISHED_WELL_SQL}) THEN r.processed_at END)
    ELSE (SELECT p.previous_processed_at FROM replays p
      WHERE p.receipt_id = r.id AND p.replay_number = 1 AND p.previous_status IN (${FINISHED_WELL_SQL})) END)`;

interface RunsReceipt {
  receivedAt: number;
  processedAt: number | null;
  status: string;
}
interface RunsReplay {
  replayNumber: number;
  replayedAt: number;
  /** How the run it ended had ended (null: a replay logged before the replays table). */
  previousStatus: string | null;
  previousProcessedAt: number | null;
}
interface RunsAttempt {
  attemptNumber: number;
  startedAt: number;
  finishedAt: number | null;
}

/** One run: the first (replayNumber null) from receipt, or a replay's from the replay. */
export interface ReceiptRun {
  replayNumber: number | null;
  startedAt: number;
  /** When it finished well; null while it runs, when it went dead, or when not known. */
  finishedAt: number | null;
  durationMs: number | null;
}

export interface ReceiptFigures {
  attempts: number;
  /** Null for a receipt never replayed. */
  attemptsSinceReplay: number | null;
  /** The first run's received → finished; null unless it finished well. */
  receivedToFinishedMs: number | null;
  runs: ReceiptRun[];
}

/**
 * The figures of one receipt from its row, its replays (oldest first) and its attempts as the timeline lists them.
 * A run that ended well finished at the processed_at its successor kept (or the receipt's own, for the latest run),
 * when that falls inside the run; a run that applied nothing (a replay of an already committed event) leaves processed_at alone,
 * so its last attempt's end is its finish.
 */
export function receiptFigures(
  receipt: RunsReceipt & { leaseGeneration: number },
  replays: readonly RunsReplay[],
  attemptsListed: readonly RunsAttempt[],
): ReceiptFigures {
  const starts = [receipt.receivedAt, ...replays.map((replay) => replay.replayedAt)];
  const runs = starts.map((startedAt, index): ReceiptRun => {
    const endsBefore = starts[index + 1] ?? Number.POSITIVE_INFINITY;
    const latest = index === starts.length - 1;
    const endedWith = latest ? receipt.status : replays[index]!.previousStatus;
    const kept = latest ? receipt.processedAt : replays[index]!.previousProcessedAt;
    const lastAttempt = attemptsListed.filter((a) => a.startedAt >= startedAt && a.startedAt < endsBefore).at(-1);
    const finishedAt = !isFinishedWell(endedWith)
      ? null
      : kept !== null && kept >= startedAt && kept <= endsBefore
        ? kept
        : (lastAttempt?.finishedAt ?? null);
    return {
      replayNumber: index === 0 ? null : replays[index - 1]!.replayNumber,
      startedAt,
      finishedAt,
      durationMs: finishedAt === null ? null : finishedAt - startedAt,
    };
  });
  const lastReplayAt = replays.at(-1)?.replayedAt ?? null;
  return {
    attempts: Math.max(receipt.leaseGeneration, ...attemptsListed.map((attempt) => attempt.attemptNumber)),
    attemptsSinceReplay:
      lastReplayAt === null ? null : attemptsListed.filter((attempt) => attempt.startedAt >= lastReplayAt).length,
    receivedToFinishedMs: runs[0]!.durationMs,
    runs,
  };
}
