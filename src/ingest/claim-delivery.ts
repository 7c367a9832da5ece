import { claimEvent, pickHeaders } from "../claims/claim-event";
import { recordDelivery } from "../lib/analytics";
import { apiError } from "../lib/errors";
import { logError, logEvent, logsSuccesses } from "../lib/log";
import type { CarriedEvent, ProviderAdapter, VerifyResult } from "../providers/types";
import type { SourceConfig } from "../sources/config";
import { acknowledge } from "./acknowledge";

/** Steps 5b and 6 of POST /webhooks/:source (./route.ts): claim what a verified delivery carries, then answer. */

/** What the route knows of the delivery in hand that these steps use: enough to name it in a log line and meter it. */
export interface ClaimingDelivery {
  readonly env: Env;
  readonly sourceName: string;
  readonly requestId: string;
  readonly startedAt: number;
}

type Event = Extract<VerifyResult, { kind: "event" }>;

/** The events a delivery carries: most carry one, an Adyen batch one per item. */
function eventsOf(verdict: Event): readonly CarriedEvent[] {
  return verdict.events ?? [{ identity: verdict.identity, storedBody: verdict.storedBody }];
}

/**
 * 5b. Claim: one Durable Object transaction per event makes it durable (or finds it a duplicate). A delivery of
 * several events claims them side by side (each in its own key's shard); if any claim fails the answer is a 503,
 * and the sender's retry re-claims the rest as duplicates.
 */
export async function claimDelivery(
  delivery: ClaimingDelivery,
  request: Request,
  {
    source,
    adapter,
    rawBody,
    verdict,
    stampedSecret,
  }: {
    source: SourceConfig;
    adapter: ProviderAdapter;
    rawBody: Uint8Array;
    verdict: Event;
    /** The secret whose use the shard stamps (./secret-choice.ts), when there was one to tell apart. */
    stampedSecret: string | undefined;
  },
) {
  const keptHeaders = pickHeaders(request.headers, adapter.keptHeaders);
  // A failed claim is logged and comes back null, so every claim has settled before the answer: none is still in
  // flight when the sender hears it must retry.
  const claims = await Promise.all(
    eventsOf(verdict).map(async ({ identity, storedBody }) => {
      try {
        const claimed = await claimEvent(delivery.env, {
          source,
          identity,
          rawBody: storedBody ?? rawBody,
          keptHeaders,
          receivedAt: delivery.startedAt,
          provenance: "live",
          ...(stampedSecret !== undefined ? { verifiedBy: stampedSecret } : {}),
        });
        return { identity, ...claimed };
      } catch (error) {
        logError("delivery.claim_failed", error, {
          source: delivery.sourceName,
          eventKey: identity.eventKey,
          requestId: delivery.requestId,
        });
        return null;
      }
    }),
  );
  if (claims.includes(null))
    throw apiError(503, "claim_unavailable", "The delivery could not be stored; retry later.", { "retry-after": "5" });
  return claims.filter((claimed) => claimed !== null);
}

/** 6. Acknowledge: a line and a meter per event, and the 2xx the sender waits for. */
export function acknowledgeClaims(
  delivery: ClaimingDelivery,
  claims: Awaited<ReturnType<typeof claimDelivery>>,
  verdict: Event,
): Response {
  const { env, sourceName: source, requestId, startedAt } = delivery;
  for (const claimed of claims) {
    // A first acceptance is a routine line, logged only with LOG_SUCCESSES = "true"; a duplicate or a quarantine
    // always logs.
    if (claimed.disposition !== "accepted" || logsSuccesses(env)) {
      logEvent("delivery", {
        source,
        eventKey: claimed.identity.eventKey,
        eventType: claimed.identity.eventType,
        disposition: claimed.disposition,
        receipt: claimed.receiptId,
        signature: "valid",
        timestampAgeSeconds: verdict.timestampAgeSeconds,
        requestId,
        durationMs: Date.now() - startedAt,
      });
    }
    recordDelivery(env, {
      source,
      disposition: claimed.disposition,
      signature: "valid",
      verifiedBy: verdict.verifiedBy,
      ackMs: Date.now() - startedAt,
    });
  }
  return acknowledge(claims, verdict.acknowledgement);
}
