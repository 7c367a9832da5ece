import { and, eq, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import { database } from "../db/client";
import { attempts, receipts } from "../db/schema";
import type { VersionGate } from "../handlers/types";
import { logError } from "../lib/log";
import { meteredD1 } from "../lib/meter";
import { type AttemptFacts, type Decision, decide } from "./decide";
import { type FannedOut, furtherDeliveryStatements } from "./delivery-rows";
import type { ReceiptForWork } from "./load";
import type { AttemptRun } from "./run-destination";
import { ABORT_UNLESS_CHANGED, batchUnlessEmpty, effectStatements, prepare } from "./statements";

/**
 * Writing what a consumer batch decided: every receipt's outcome, and every applied plan's effect, in one D1
 * batch (one transaction). The guard that makes an effect happen once is the receipt's own row: its commit update
 * (`committed_at IS NULL` → set) runs first in the event's statements, and when it changes nothing — an earlier
 * run committed this event — the next statement aborts the whole batch. A version gate works the same way. If the
 * shared batch aborts, each receipt is committed on its own, and the one that aborted again is told apart by
 * reading its row, never by the error's text.
 */

export interface FinishedAttempt {
  receipt: ReceiptForWork;
  run: AttemptRun;
  facts: AttemptFacts;
  startedAt: number;
  /** The generation this attempt holds: its lease's, or the next one for a lease-free attempt. */
  generation: number;
  leased: boolean;
  /** Decided before the attempt was committed (an abandoned attempt's verdict, settled before anything ran). */
  decided?: Decision;
  /** A first attempt that fanned the event out to several routes (fan-out.ts): written with the receipt's own outcome. */
  fanOut?: FannedOut;
}

/** Commits every attempt, shared batch first; returns the decision each receipt ended with. */
export async function commitAttempts(env: Env, finished: readonly FinishedAttempt[]): Promise<Map<string, Decision>> {
  const d1 = meteredD1(env.DB);
  const decided = finished.map((attempt) => ({
    attempt,
    decision: attempt.decided ?? decide(attempt.run.result, attempt.facts),
  }));
  const outcomes = new Map<string, Decision>();
  if (decided.length === 0) return outcomes;
  try {
    await batchUnlessEmpty(
      d1,
      decided.flatMap(({ attempt, decision }) => statementsFor(d1, attempt, decision)),
    );
    for (const { attempt, decision } of decided) outcomes.set(attempt.receipt.receiptId, decision);
    return outcomes;
  } catch (sharedFailure) {
    if (decided.length === 1) {
      const { attempt, decision } = decided[0]!;
      outcomes.set(attempt.receipt.receiptId, await commitAlone(env, attempt, decision, sharedFailure));
      return outcomes;
    }
  }
  // One receipt's guard (or a handler's statement) aborted the shared batch: commit each on its own.
  for (const { attempt, decision } of decided) {
    outcomes.set(attempt.receipt.receiptId, await commitAlone(env, attempt, decision, null));
  }
  return outcomes;
}

async function commitAlone(
  env: Env,
  attempt: FinishedAttempt,
  decision: Decision,
  knownFailure: unknown,
): Promise<Decision> {
  const d1 = meteredD1(env.DB);
  if (knownFailure === null) {
    try {
      await batchUnlessEmpty(d1, statementsFor(d1, attempt, decision));
      return decision;
    } catch (failure) {
      knownFailure = failure;
    }
  }
  const explained = await explainAbort(env, attempt, decision, knownFailure);
  const fallback = explained.decision;
  try {
    await batchUnlessEmpty(d1, statementsFor(d1, explained.attempt, fallback));
    return fallback;
  } catch (error) {
    // Another run may have committed the event between the explanation and this write: then this attempt is a
    // duplicate, and the rest of the batch goes on. Anything else (D1 gone) fails the batch, to be retried whole.
    if (!(await isCommitted(env, attempt))) throw error;
    logError("commit.raced", error, { receipt: attempt.receipt.receiptId });
    return { kind: "nothing", queue: { kind: "done", status: "duplicate" }, record: null };
  }
}

async function isCommitted(env: Env, attempt: FinishedAttempt): Promise<boolean> {
  const [row] = await database(env)
    .select({ committedAt: receipts.committedAt })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  return row?.committedAt != null;
}

/**
 * Why an event's batch aborted, from stored state: committed by another run, lost its version gate, or failed. A
 * first attempt that fanned out is written again without its fan-out when another run's fan-out came first (that
 * run's deliveries stand), or with its further routes' effects left to their own deliveries when the abort was ours.
 */
async function explainAbort(
  env: Env,
  attempt: FinishedAttempt,
  decision: Decision,
  failure: unknown,
): Promise<{ attempt: FinishedAttempt; decision: Decision }> {
  const db = database(env);
  const [row] = await db
    .select({ committedAt: receipts.committedAt, filteredRoutes: receipts.filteredRoutes })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  if (attempt.fanOut && row && row.filteredRoutes !== null) {
    const alone = { ...attempt, fanOut: undefined };
    return {
      attempt: alone,
      decision: row.committedAt != null ? decide({ status: "duplicate" }, attempt.facts) : decision,
    };
  }
  const deferred = attempt.fanOut ? { ...attempt, fanOut: { ...attempt.fanOut, deferEffects: true } } : attempt;
  return { attempt: deferred, decision: await explainOwnAbort(attempt, row?.committedAt ?? null, failure) };
}

async function explainOwnAbort(
  attempt: FinishedAttempt,
  committedAt: number | null,
  failure: unknown,
): Promise<Decision> {
  if (committedAt != null) return decide({ status: "duplicate" }, attempt.facts);
  const gate = attempt.run.plan?.versionGate;
  if (gate) {
    const stored = await storedVersion(gate);
    if (stored !== null && stored >= gate.version) {
      const note =
        stored === gate.version && gate.orderedBy === "timestamp"
          ? "order unknown: same timestamp as the stored state; not applied"
          : undefined;
      return decide({ status: "stale", againstVersion: stored, note }, attempt.facts);
    }
  }
  const message = failure instanceof Error ? failure.message : String(failure);
  return decide({ status: "retry", error: `commit failed: ${message}` }, attempt.facts);
}

async function storedVersion(gate: VersionGate): Promise<number | null> {
  const row = await gate.readStored.first<{ version: number | null }>();
  return row?.version ?? null;
}

/**
 * Entering a resting status stamps status_entered_at on D1's clock in the same update (migrations/0013 and 0014):
 * the trigger, seeing it set, writes the row no second time.
 */
const STAMPED_ENTRY = { statusEnteredAt: sql`CAST(unixepoch('subsec') * 1000 AS INTEGER)` };

/** The statements that write one attempt's decision. */
function statementsFor(d1: D1Database, attempt: FinishedAttempt, decision: Decision): D1PreparedStatement[] {
  const db = database({ DB: d1 });
  const { receipt } = attempt;
  const finishedAt = attempt.facts.finishedAt;
  const attemptColumns = {
    // A leased attempt was counted when it took its lease (lease.ts); a lease-free one is counted here.
    ...(attempt.leased ? {} : { attempts: sql`${receipts.attempts} + 1` }),
    // Never backwards: a slow consumer committing after its lease was taken over leaves its successor's generation.
    leaseGeneration: sql`MAX(${receipts.leaseGeneration}, ${attempt.generation})`,
    leaseUntil: null,
    attemptStartedAt: attempt.startedAt,
    attemptDurationMs: finishedAt - attempt.startedAt,
  };
  const { fanOut } = attempt;
  // A fan-out is written once: by the first attempt to commit one (the guard aborts any other's batch).
  const unclaimed = and(
    eq(receipts.receiptId, receipt.receiptId),
    isNull(receipts.committedAt),
    fanOut ? isNull(receipts.filteredRoutes) : undefined,
  );
  const fanOutColumns = fanOut ? { route: fanOut.route, filteredRoutes: fanOut.filtered.join(",") } : {};
  const fanOutRows = fanOut
    ? [prepare(d1, ABORT_UNLESS_CHANGED), ...furtherDeliveryStatements(d1, receipt.receiptId, fanOut)]
    : [];
  // A failure is recorded only by the attempt that still holds the receipt: its lease (still `processing` at its
  // generation: once the lease was found run out, the receipt was handed on), or for a lease-free attempt the
  // generation it read (the first to finish moves it on).
  const stillOurs = attempt.leased
    ? and(unclaimed, eq(receipts.leaseGeneration, attempt.generation), eq(receipts.status, "processing"))
    : and(unclaimed, eq(receipts.leaseGeneration, attempt.generation - 1));

  switch (decision.kind) {
    case "commit": {
      const { result } = decision;
      if (result.status === "skipped") {
        return [
          prepare(
            d1,
            db
              .update(receipts)
              .set({
                ...attemptColumns,
                ...fanOutColumns,
                ...STAMPED_ENTRY,
                status: "skipped",
                processedAt: finishedAt,
                nextAttemptAt: null,
                lastError: result.reason.slice(0, 500),
              })
              .where(unclaimed),
          ),
          ...fanOutRows,
          ...ownRowOfLeased(d1, attempt, "skipped", result.reason.slice(0, 500), null),
        ];
      }
      const committed = prepare(
        d1,
        db
          .update(receipts)
          .set({
            ...attemptColumns,
            ...fanOutColumns,
            ...(result.status === "stale" ? STAMPED_ENTRY : {}),
            status: result.status,
            committedAt: finishedAt,
            processedAt: finishedAt,
            nextAttemptAt: null,
            lastError: result.status === "stale" ? (result.note ?? null) : null,
            staleAgainstVersion: result.status === "stale" ? result.againstVersion : null,
            attemptHttpStatus: result.status === "processed" ? (result.httpStatus ?? null) : null,
          })
          .where(unclaimed),
      );
      return [
        committed,
        prepare(d1, ABORT_UNLESS_CHANGED),
        ...effectStatements(d1, result.status === "processed" ? attempt.run.plan : null),
        ...fanOutRows.slice(1),
        ...ownRowOfLeased(
          d1,
          attempt,
          result.status,
          result.status === "stale" ? (result.note ?? null) : null,
          result.status === "processed" ? (result.httpStatus ?? null) : null,
        ),
      ];
    }
    case "nothing":
      if (decision.record === null) return [];
      return [
        // A replay of a committed event: back to the status its committing run decided, nothing applied.
        prepare(
          d1,
          db
            .update(receipts)
            .set({
              status: sql`CASE WHEN ${receipts.staleAgainstVersion} IS NULL THEN 'processed' ELSE 'stale' END`,
              leaseUntil: null,
              nextAttemptAt: null,
            })
            .where(
              and(
                eq(receipts.receiptId, receipt.receiptId),
                isNotNull(receipts.committedAt),
                inArray(receipts.status, ["pending", "processing"]),
              ),
            ),
        ),
        attemptRow(d1, attempt, "duplicate", decision.record.note, null),
      ];
    case "fail":
      return [
        prepare(
          d1,
          db
            .update(receipts)
            .set({
              ...attemptColumns,
              ...fanOutColumns,
              ...(decision.receiptStatus === "dead" ? STAMPED_ENTRY : {}),
              status: decision.receiptStatus,
              nextAttemptAt: decision.nextAttemptAt,
              lastError: decision.lastError,
              attemptHttpStatus: decision.attempt.httpStatus,
            })
            .where(fanOut ? and(stillOurs, isNull(receipts.filteredRoutes)) : stillOurs),
        ),
        // With a fan-out, the update either changed the receipt or aborted the batch: the attempt's number is its own.
        ...(fanOut ? fanOutRows.slice(0, 1) : []),
        attemptRow(
          d1,
          attempt,
          decision.attempt.outcome,
          decision.attempt.error,
          decision.attempt.httpStatus,
          fanOut !== undefined,
        ),
        ...fanOutRows.slice(1),
      ];
  }
}

/**
 * A success writes no attempt row. But a leased attempt's number is its own, and when its lease ran out before it
 * finished, someone presumed it lost and wrote `unknown` there (lease.ts): its real outcome replaces that row. No row,
 * nothing written.
 */
function ownRowOfLeased(
  d1: D1Database,
  attempt: FinishedAttempt,
  outcome: "processed" | "stale" | "skipped",
  error: string | null,
  httpStatus: number | null,
): D1PreparedStatement[] {
  if (!attempt.leased) return [];
  const db = database({ DB: d1 });
  const finishedAt = attempt.facts.finishedAt;
  return [
    prepare(
      d1,
      db
        .update(attempts)
        .set({
          startedAt: attempt.startedAt,
          finishedAt,
          outcome,
          httpStatus,
          error,
          durationMs: finishedAt - attempt.startedAt,
        })
        .where(and(eq(attempts.receiptId, attempt.receipt.receiptId), eq(attempts.attemptNumber, attempt.generation))),
    ),
  ];
}

function attemptRow(
  d1: D1Database,
  attempt: FinishedAttempt,
  outcome: "retry" | "unknown" | "dead" | "duplicate",
  error: string | null,
  httpStatus: number | null,
  numberIsOwn = false,
): D1PreparedStatement {
  const db = database({ DB: d1 });
  const receiptId = attempt.receipt.receiptId;
  const row = {
    receiptId,
    startedAt: attempt.startedAt,
    finishedAt: attempt.facts.finishedAt,
    outcome,
    httpStatus,
    error,
    durationMs: attempt.facts.finishedAt - attempt.startedAt,
  };
  if (attempt.leased) {
    // A leased attempt's number is its own: any row already there is a presumption (lease expired, outcome unknown)
    // made while it was still running, and its real outcome replaces it.
    const { receiptId: _key, ...outcomeColumns } = row;
    return prepare(
      d1,
      db
        .insert(attempts)
        .values({ ...row, attemptNumber: attempt.generation })
        .onConflictDoUpdate({ target: [attempts.receiptId, attempts.attemptNumber], set: outcomeColumns }),
    );
  }
  if (numberIsOwn)
    return prepare(
      d1,
      db
        .insert(attempts)
        .values({ ...row, attemptNumber: attempt.generation })
        .onConflictDoNothing(),
    );
  if (outcome === "duplicate") {
    // A lease-free duplicate run moves no generation on (the receipt's belongs to the run that committed): it takes
    // the next number after every attempt recorded so far. No lease is taken on a committed receipt, so no later
    // attempt wants that number.
    const attemptNumber = sql<number>`(SELECT MAX(${receipts.leaseGeneration}, COALESCE((SELECT MAX(${attempts.attemptNumber}) FROM ${attempts} WHERE ${attempts.receiptId} = ${receiptId}), 0)) + 1
          FROM ${receipts} WHERE ${receipts.receiptId} = ${receiptId})`;
    return prepare(
      d1,
      db
        .insert(attempts)
        .values({ ...row, attemptNumber })
        .onConflictDoNothing(),
    );
  }
  // A lease-free failure's number is the generation after the one it read, and it is its own only if its fenced
  // update (the statement just before this one) changed the receipt. Otherwise another run of that number finished
  // first and the number is that run's: nothing is written over it.
  return prepare(
    d1,
    sql`INSERT INTO ${attempts} (receipt_id, attempt_number, started_at, finished_at, outcome, http_status, error, duration_ms)
        SELECT ${receiptId}, ${attempt.generation}, ${row.startedAt}, ${row.finishedAt}, ${outcome}, ${httpStatus}, ${error}, ${row.durationMs}
        WHERE changes() > 0
        ON CONFLICT DO NOTHING`,
  );
}
