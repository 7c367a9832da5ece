import type { EventFacts } from "../model/claims";

/** What a handler sees: the receipt's identity and its verified payload. */
export interface HandlerEvent extends EventFacts {
  receiptId: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  payload: unknown;
}

/**
 * The one version-ordering mechanism (DESIGN invariant 5). `claim` is a write that changes exactly one row when
 * the event is newer than the stored state and none otherwise (`… WHERE stored_version < excluded.version`). The
 * consumer runs it first in the event's batch and aborts the whole batch when it changed nothing, so the plan's
 * other statements never apply out of order and the receipt is then recorded stale in a batch of its own.
 */
export interface VersionGate {
  claim: D1PreparedStatement;
  /** Reads the stored version as a `version` column, to name the version that won. */
  readStored: D1PreparedStatement;
  /** This event's version (or timestamp). */
  version: number;
  /** With "timestamp", an equal stored value means the order is unknown, said so in the stale note. */
  orderedBy: "version" | "timestamp";
}

/**
 * A handler plans its effect instead of performing it: the consumer runs the statements in one D1 batch
 * together with the receipt's commit, so the effect and "this event is done" commit or roll back together.
 */
export type HandlerPlan =
  | { outcome: "apply"; statements: D1PreparedStatement[]; versionGate?: VersionGate }
  /** Older than what is stored: recorded as processed-stale, nothing applied. */
  | {
      outcome: "stale";
      againstVersion: number /** why, when it is not plainly older (a timestamp tie) */;
      note?: string;
    }
  /** Authentic but not for this handler (e.g. an unknown type): recorded as a no-op, and replayable later. */
  | { outcome: "skip"; reason: string };

/** A call to an API outside D1, made through `HandlerContext.callExternal`. */
export interface ExternalCall {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /**
   * Default 10 s; at most 4 minutes (MAX_DESTINATION_TIMEOUT_MS), and all of one attempt's calls share one such
   * budget, so the attempt ends inside its 5-minute lease.
   */
  timeoutMs?: number;
}

export interface HandlerContext {
  db: D1Database;
  env: Env;
  /** The attempt's clock (epoch ms): use it instead of Date.now() so retries are testable. */
  now: number;
  /**
   * A key derived from the receipt, identical on every retry and replay of this event. `purpose` tells apart
   * several external calls made for one event ("charge", "email", …).
   */
  idempotencyKey(purpose?: string): string;
  /**
   * An external call that carries `Idempotency-Key: idempotencyKey(purpose)`. Resolves with a 2xx response;
   * otherwise throws PermanentFailure (4xx other than 408/429), TransientFailure (5xx, 408, 429, connection
   * failed) or OutcomeUnknown (sent, no answer in time), which the consumer records and retries accordingly.
   */
  callExternal(purpose: string, call: ExternalCall): Promise<Response>;
}

export type WebhookHandler = (event: HandlerEvent, context: HandlerContext) => Promise<HandlerPlan>;

/** A failure no retry can fix (bad payload): the receipt goes straight to dead with this message. */
export class PermanentFailure extends Error {
  override name = "PermanentFailure";
}

/** A failure worth retrying (a dependency is down). Any other thrown error is treated the same way. */
export class TransientFailure extends Error {
  override name = "TransientFailure";
  constructor(
    message: string,
    readonly details: { httpStatus?: number | null; retryAfterSeconds?: number | null } = {},
  ) {
    super(message);
  }
}

/** An external call was sent and no answer came: it may have been applied. Recorded as `unknown`, retried with the same key. */
export class OutcomeUnknown extends Error {
  override name = "OutcomeUnknown";
}
