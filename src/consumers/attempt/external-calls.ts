import {
  type ExternalCall,
  type HandlerContext,
  OutcomeUnknown,
  PermanentFailure,
  TransientFailure,
} from "../../handlers/types";
import { MAX_DESTINATION_TIMEOUT_MS } from "../../sources/config";
import { sendOutbound } from "./outbound";

const DEFAULT_EXTERNAL_TIMEOUT_MS = 10_000;

/**
 * The idempotency key of one outbound effect. Derived from the receipt id alone, which neither retries nor
 * replays change, so every resend of one effect carries the same key and the remote side can dedupe it.
 */
export function outboundIdempotencyKey(receiptId: string, purpose?: string): string {
  return purpose ? `${receiptId}.${purpose}` : receiptId;
}

/**
 * How long one external call may wait: what the handler asked for (10 s by default), never more than
 * MAX_DESTINATION_TIMEOUT_MS, and never more than what is left of the attempt's budget. Pure.
 */
export function externalCallTimeoutMs(requestedMs: number | undefined, remainingBudgetMs: number): number {
  return Math.max(
    0,
    Math.min(requestedMs ?? DEFAULT_EXTERNAL_TIMEOUT_MS, MAX_DESTINATION_TIMEOUT_MS, remainingBudgetMs),
  );
}

/**
 * The external-call half of a handler's context, bound to one receipt and one attempt's clock. Every call of the
 * attempt draws on one budget of `budgetMs` real time from here (MAX_DESTINATION_TIMEOUT_MS, a minute inside the
 * lease): however many calls a handler makes, the attempt cannot outlast its lease and overlap the next
 * consumer's. A call made with the budget spent is not sent; the attempt fails as a retry.
 */
export function externalCallsFor(
  receiptId: string,
  now: number,
  budgetMs = MAX_DESTINATION_TIMEOUT_MS,
): Pick<HandlerContext, "idempotencyKey" | "callExternal"> {
  const deadline = Date.now() + budgetMs;
  return {
    idempotencyKey: (purpose) => outboundIdempotencyKey(receiptId, purpose),
    async callExternal(purpose: string, call: ExternalCall): Promise<Response> {
      const timeoutMs = externalCallTimeoutMs(call.timeoutMs, deadline - Date.now());
      if (timeoutMs === 0) {
        throw new TransientFailure(`${purpose}: not sent: this attempt's ${budgetMs} ms for external calls is used up`);
      }
      const result = await sendOutbound(
        {
          url: call.url,
          method: call.method,
          headers: call.headers ?? {},
          body: call.body,
          timeoutMs,
          idempotencyKey: outboundIdempotencyKey(receiptId, purpose),
        },
        now,
      );
      switch (result.kind) {
        case "delivered":
          return result.response;
        case "transient":
          throw new TransientFailure(`${purpose}: ${result.error}`, result);
        case "unknown":
          throw new OutcomeUnknown(`${purpose}: ${result.error}`);
        case "permanent":
          throw new PermanentFailure(`${purpose}: ${result.error}`);
      }
    },
  };
}
