/**
 * What a ListenHub (./hub.ts) and the `listen` CLI (scripts/cli/commands/listen.mjs) say to each other over the
 * WebSocket, as JSON text frames. The hub speaks first: `connected` once it has taken the socket (the CLI shows
 * "connected" only then), and a `delivery` per attempt; the CLI answers each delivery with one `result`. "ping" is
 * answered "pong" by the runtime itself, without waking a hibernated hub.
 */

export const PING = "ping";
export const PONG = "pong";

/** A delivery still waiting for a listener: turned away while nobody listened, not since handed to one. */
export interface WaitingDelivery {
  deliveryId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  /** When it was first turned away (ms since the epoch). */
  since: number;
}

export type HubMessage =
  | {
      type: "connected";
      listen: string;
      source: string;
      route: string;
      waiting: WaitingDelivery[];
      waitingCount: number;
    }
  | { type: "delivery"; attempt: string; headers: Record<string, string>; body: string };

/** The CLI's answer to one delivery: your server's status and how long it took, or why it could not be reached. */
export type ListenerResult =
  | { type: "result"; attempt: string; status: number; latencyMs: number }
  | { type: "result"; attempt: string; error: string; latencyMs: number };

/** How one attempt to a listener ended, as the consumer reads it (src/consumers/attempt/listen-attempt.ts). */
export type ListenOutcome =
  | { kind: "answered"; status: number; latencyMs: number }
  /** Nobody listens on this name: the delivery waits, retried by the route's rules. */
  | { kind: "nobody-listening" }
  /** The listener could not reach its local server (refused, timed out there): nothing was taken. */
  | { kind: "unreachable"; error: string }
  /** Handed over, and no answer came (the socket closed, or the time ran out): the server may have acted. */
  | { kind: "no-answer"; error: string };

const MAX_ERROR_CHARS = 200;

/** The listener's frame as a result, or null for anything else (a stray or malformed frame is ignored). Pure. */
export function parseListenerResult(frame: string | ArrayBuffer): ListenerResult | null {
  if (typeof frame !== "string") return null;
  let value: unknown;
  try {
    value = JSON.parse(frame);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null) return null;
  const message = value as Record<string, unknown>;
  if (message.type !== "result" || typeof message.attempt !== "string") return null;
  const latencyMs = typeof message.latencyMs === "number" && message.latencyMs >= 0 ? message.latencyMs : 0;
  if (
    typeof message.status === "number" &&
    Number.isInteger(message.status) &&
    message.status >= 100 &&
    message.status <= 599
  )
    return { type: "result", attempt: message.attempt, status: message.status, latencyMs };
  if (typeof message.error === "string")
    return { type: "result", attempt: message.attempt, error: message.error.slice(0, MAX_ERROR_CHARS), latencyMs };
  return null;
}

/** A result as the attempt's outcome. Pure. */
export function outcomeOf(result: ListenerResult): ListenOutcome {
  return "status" in result
    ? { kind: "answered", status: result.status, latencyMs: result.latencyMs }
    : { kind: "unreachable", error: result.error };
}
