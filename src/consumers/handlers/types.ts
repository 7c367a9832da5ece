/** What a handler sees: the receipt's identity and its verified payload. */
export interface HandlerEvent {
  receiptId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  subjectId: string | null;
  version: number | null;
  occurredAt: number | null;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  payload: unknown;
}

/**
 * A handler plans its effect instead of performing it: the consumer runs the statements in one D1 batch
 * together with the processed-key insert, so the effect and "this event is done" commit or roll back together.
 */
export type HandlerPlan =
  | {
      outcome: "apply";
      statements: D1PreparedStatement[];
      /**
       * Index (in `statements`) of a version-guarded write. If it changed no row, a newer version won a race
       * after the handler looked, and the receipt is recorded as stale instead of processed.
       */
      guardedStatement?: number;
      /** The version the guard compared against, reported when the guarded write loses. */
      guardedVersion?: number;
    }
  /** Older than what is stored: recorded as processed-stale, nothing applied. */
  | { outcome: "stale"; againstVersion: number }
  /** Authentic but not for this handler (e.g. an unknown type): recorded as a no-op. */
  | { outcome: "skip"; reason: string };

export interface HandlerContext {
  db: D1Database;
  env: Env;
}

export type WebhookHandler = (event: HandlerEvent, context: HandlerContext) => Promise<HandlerPlan>;

/** A failure no retry can fix (bad payload): the receipt goes straight to dead with this message. */
export class PermanentFailure extends Error {
  override name = "PermanentFailure";
}
