import { listenHub } from "../../listen/client";
import type { ListenOutcome } from "../../listen/protocol";
import type { Destination } from "../../sources/config";
import { type ForwardRequest, type ForwardResult, forwardHeaders } from "./forward";
import { statusVerdict } from "./outbound";

type ListenDestination = Extract<Destination, { kind: "listen" }>;

/**
 * A `listen:<name>` route's attempt: the same signed request a forward sends, handed to the name's hub
 * (src/listen/hub.ts), which pushes it to the connected CLI and answers with the local server's status. Its outcome
 * reads as a forward's would, so the route's retry rules, ordering and gates treat a listener like any backend.
 */
export async function deliverToListener(
  env: Env,
  destination: ListenDestination,
  request: Omit<ForwardRequest, "url" | "timeoutMs">,
  signingSecret: string,
  now: number,
): Promise<ForwardResult> {
  const outcome = await listenHub(env, destination.listenName).deliver({
    deliveryId: request.deliveryId,
    source: request.source,
    eventKey: request.eventKey,
    eventType: request.eventType,
    headers: await forwardHeaders(request, signingSecret, now),
    body: request.body,
    timeoutMs: destination.timeoutMs,
  });
  return listenResult(destination.listenName, outcome);
}

/** A hub's outcome as a forward's result: the local server's status is judged as a backend's is (outbound.ts). Pure. */
export function listenResult(listenName: string, outcome: ListenOutcome): ForwardResult {
  const where = `listen:${listenName}`;
  switch (outcome.kind) {
    case "nobody-listening":
      return {
        kind: "transient",
        httpStatus: null,
        error: `nobody is listening on ${where}: waiting for npm run cli -- listen`,
        retryAfterSeconds: null,
      };
    case "unreachable":
      return {
        kind: "transient",
        httpStatus: null,
        error: `the listener on ${where} could not reach its server: ${outcome.error}`,
        retryAfterSeconds: null,
      };
    case "no-answer":
      return { kind: "unknown", error: `${where}: ${outcome.error}; the server may have applied it` };
    case "answered": {
      const verdict = statusVerdict(outcome.status);
      if (verdict === "delivered") return { kind: "delivered", httpStatus: outcome.status };
      const error = `the server behind ${where} answered ${outcome.status}`;
      return verdict === "transient"
        ? { kind: "transient", httpStatus: outcome.status, error, retryAfterSeconds: null }
        : { kind: "permanent", httpStatus: outcome.status, error };
    }
  }
}
