import { and, eq, inArray, isNotNull, isNull, sql, type SQL } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { database } from "../db/client";
import { attempts, batchAborts, receipts } from "../db/schema";
import { logError } from "../lib/log";
import { count, meteredD1 } from "../lib/meter";
import { decide, type AttemptFacts, type Decision } from "./decide";
import type { VersionGate } from "../handlers/types";
import type { ReceiptForWork } from "./load";
import type { AttemptRun } from "./run";

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
}

const dialect = new SQLiteAsyncDialect();

/** Aborts the batch it stands in when the statement before it changed no row (it inserts NULL into a NOT NULL column). */
const ABORT_UNLESS_CHANGED = sql`INSERT INTO ${batchAborts} (reason) SELECT NULL WHERE changes() = 0`;

type Buildable = SQL | { toSQL(): { sql: string; params: unknown[] } };

function prepare(d1: D1Database, query: Buildable): D1PreparedStatement {
  const built = "toSQL" in query ? query.toSQL() : dialect.sqlToQuery(query);
  return d1.prepare(built.sql).bind(...built.params);
}

/** Commits every attempt, shared batch first; returns the decision each receipt ended with. */
export async function commitAttempts(env: Env, finished: readonly FinishedAttempt[]): Promise<Map<string, Decision>> {
  const d1 = meteredD1(env.DB);
  const decided = finished.map((attempt) => ({ attempt, decision: attempt.decided ?? decide(attempt.run.result, attempt.facts) }));
  const outcomes = new Map<string, Decision>();
  if (decided.length === 0) return outcomes;
  try {
    await batchUnlessEmpty(d1, decided.flatMap(({ attempt, decision }) => statementsFor(d1, attempt, decision)));
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

async function commitAlone(env: Env, attempt: FinishedAttempt, decision: Decision, knownFailure: unknown): Promise<Decision> {
  const d1 = meteredD1(env.DB);
  if (knownFailure === null) {
    try {
      await batchUnlessEmpty(d1, statementsFor(d1, attempt, decision));
      return decision;
    } catch (failure) {
      knownFailure = failure;
    }
  }
  const fallback = await explainAbort(env, attempt, knownFailure);
  try {
    await batchUnlessEmpty(d1, statementsFor(d1, attempt, fallback));
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
 * D1 refuses an empty batch; an attempt that records nothing (lease taken elsewhere) makes none. The rows the
 * handlers' own statements wrote are metered apart from the receiver's, matched to their results by statement.
 */
async function batchUnlessEmpty(d1: D1Database, statements: D1PreparedStatement[]): Promise<void> {
  if (statements.length === 0) return;
  const results = await d1.batch(statements);
  const handlerRows = statements.reduce((sum, statement, index) => (handlerStatements.has(statement) ? sum + (results[index]?.meta.rows_written ?? 0) : sum), 0);
  count("d1HandlerRowsWritten", handlerRows);
}

/** The statements a handler planned (its effect and version gate), as opposed to the receiver's own. */
const handlerStatements = new WeakSet<D1PreparedStatement>();

/** Why an event's batch aborted, from stored state: committed by another run, lost its version gate, or failed. */
async function explainAbort(env: Env, attempt: FinishedAttempt, failure: unknown): Promise<Decision> {
  const db = database(env);
  const [row] = await db
    .select({ committedAt: receipts.committedAt })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  if (row?.committedAt != null) return decide({ status: "duplicate" }, attempt.facts);
  const gate = attempt.run.plan?.versionGate;
  if (gate) {
    const stored = await storedVersion(gate);
    if (stored !== null && stored >= gate.version) {
      const note = stored === gate.version && gate.orderedBy === "timestamp" ? "order unknown: same timestamp as the stored state; not applied" : undefined;
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
  const unclaimed = and(eq(receipts.receiptId, receipt.receiptId), isNull(receipts.committedAt));
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
              .set({ ...attemptColumns, status: "skipped", processedAt: finishedAt, nextAttemptAt: null, lastError: result.reason.slice(0, 500) })
              .where(unclaimed),
          ),
          ...ownRowOfLeased(d1, attempt, "skipped", result.reason.slice(0, 500), null),
        ];
      }
      const committed = prepare(
        d1,
        db
          .update(receipts)
          .set({
            ...attemptColumns,
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
      const plan = result.status === "processed" ? attempt.run.plan : null;
      const gate = plan?.versionGate;
      const effect = [...(gate ? [gate.claim] : []), ...(plan?.statements ?? [])];
      for (const statement of effect) handlerStatements.add(statement);
      return [
        committed,
        prepare(d1, ABORT_UNLESS_CHANGED),
        ...(gate ? [gate.claim, prepare(d1, ABORT_UNLESS_CHANGED)] : []),
        ...(plan?.statements ?? []),
        ...ownRowOfLeased(d1, attempt, result.status, result.status === "stale" ? (result.note ?? null) : null, result.status === "processed" ? (result.httpStatus ?? null) : null),
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
            .where(and(eq(receipts.receiptId, receipt.receiptId), isNotNull(receipts.committedAt), inArray(receipts.status, ["pending", "processing"]))),
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
              status: decision.receiptStatus,
              nextAttemptAt: decision.nextAttemptAt,
              lastError: decision.lastError,
              attemptHttpStatus: decision.attempt.httpStatus,
            })
            .where(stillOurs),
        ),
        attemptRow(d1, attempt, decision.attempt.outcome, decision.attempt.error, decision.attempt.httpStatus),
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
        .set({ startedAt: attempt.startedAt, finishedAt, outcome, httpStatus, error, durationMs: finishedAt - attempt.startedAt })
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
  if (outcome === "duplicate") {
    // A lease-free duplicate run moves no generation on (the receipt's belongs to the run that committed): it takes
    // the next number after every attempt recorded so far. No lease is taken on a committed receipt, so no later
    // attempt wants that number.
    const attemptNumber = sql<number>`(SELECT MAX(${receipts.leaseGeneration}, COALESCE((SELECT MAX(${attempts.attemptNumber}) FROM ${attempts} WHERE ${attempts.receiptId} = ${receiptId}), 0)) + 1
          FROM ${receipts} WHERE ${receipts.receiptId} = ${receiptId})`;
    return prepare(d1, db.insert(attempts).values({ ...row, attemptNumber }).onConflictDoNothing());
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
