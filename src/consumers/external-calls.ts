import { OutcomeUnknown, PermanentFailure, TransientFailure, type ExternalCall, type HandlerContext } from "../handlers/types";
import { sendOutbound } from "./outbound";

const DEFAULT_EXTERNAL_TIMEOUT_MS = 10_000;

/**
 * The idempotency key of one outbound effect. Derived from the receipt id alone, which neither retries nor
 * replays change, so every resend of one effect carries the same key and the remote side can dedupe it.
 */
export function outboundIdempotencyKey(receiptId: string, purpose?: string): string {
  return purpose ? `${receiptId}.${purpose}` : receiptId;
}

/** The external-call half of a handler's context, bound to one receipt and one attempt's clock. */
export function externalCallsFor(receiptId: string, now: number): Pick<HandlerContext, "idempotencyKey" | "callExternal"> {
  return {
    idempotencyKey: (purpose) => outboundIdempotencyKey(receiptId, purpose),
    async callExternal(purpose: string, call: ExternalCall): Promise<Response> {
      const result = await sendOutbound(
        {
          url: call.url,
          method: call.method,
          headers: call.headers ?? {},
          body: call.body,
          timeoutMs: call.timeoutMs ?? DEFAULT_EXTERNAL_TIMEOUT_MS,
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
