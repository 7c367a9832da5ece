import { DurableObject } from "cloudflare:workers";
import { encodeBase64 } from "../crypto/encoding";
import {
  type HubMessage,
  type ListenOutcome,
  outcomeOf,
  PING,
  PONG,
  parseListenerResult,
  type WaitingDelivery,
} from "./protocol";

/**
 * One `listen:<name>` destination's hub (docs/cli.md, "`listen <source> [--route R] --forward URL`"): a Durable Object per name holding the WebSocket of
 * whoever runs `npm run cli -- listen` on it. It accepts sockets through the hibernation API, so a listener that
 * waits for events costs no duration; the consumer's attempt (src/consumers/attempt/listen-attempt.ts) calls
 * `deliver`, which pushes the signed delivery to the newest listener and waits for its answer. With nobody listening
 * the attempt fails retryably: the route's retry rules hold the delivery, and the hub lists it as waiting for the
 * next listener to see.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS waiting (
  delivery_id TEXT PRIMARY KEY, source TEXT NOT NULL, event_key TEXT NOT NULL, event_type TEXT, since INTEGER NOT NULL
) WITHOUT ROWID;
`;

/** The waiting list shows what piles up while nobody listens; past this many, the oldest are forgotten (they still retry). */
const WAITING_KEPT = 500;
/** How many waiting deliveries a new listener is shown by name; the count covers the rest. */
const WAITING_SHOWN = 20;

/** What the consumer hands the hub: the forward's signed headers and body, and the event's names for the waiting list. */
export interface ListenDelivery {
  deliveryId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  headers: Record<string, string>;
  body: Uint8Array;
  timeoutMs: number;
}

interface Pending {
  socket: WebSocket;
  deliveryId: string;
  settle: (outcome: ListenOutcome) => void;
}

export class ListenHub extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** Attempts handed to a listener and not yet answered; only ever non-empty while a `deliver` call keeps the hub awake. */
  private readonly pending = new Map<string, Pending>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    // The CLI's keep-alive is answered by the runtime: an idle listener never wakes the hub.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
  }

  /** A listener's WebSocket upgrade, already authorized and resolved to this hub by src/admin/api/listen.ts. */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket")
      return new Response("a listener connects with a WebSocket upgrade", { status: 426 });
    const [client, server] = Object.values(new WebSocketPair()) as [WebSocket, WebSocket];
    this.ctx.acceptWebSocket(server);
    const { waiting, waitingCount } = this.waitingList();
    this.send(server, {
      type: "connected",
      listen: request.headers.get("x-listen-name") ?? "",
      source: request.headers.get("x-listen-source") ?? "",
      route: request.headers.get("x-listen-route") ?? "",
      waiting,
      waitingCount,
    });
    return new Response(null, { status: 101, webSocket: client });
  }

  /** One attempt: pushed to the newest open listener, answered by its result, or turned away when nobody listens. */
  async deliver(delivery: ListenDelivery): Promise<ListenOutcome> {
    const socket = this.ctx.getWebSockets().findLast((candidate) => candidate.readyState === WebSocket.OPEN);
    if (!socket) return this.turnAway(delivery);
    const attempt = crypto.randomUUID();
    return new Promise<ListenOutcome>((resolve) => {
      const timer = setTimeout(
        () => settle({ kind: "no-answer", error: `the listener gave no answer within ${delivery.timeoutMs} ms` }),
        delivery.timeoutMs,
      );
      const settle = (outcome: ListenOutcome) => {
        clearTimeout(timer);
        this.pending.delete(attempt);
        resolve(outcome);
      };
      this.pending.set(attempt, { socket, deliveryId: delivery.deliveryId, settle });
      try {
        this.send(socket, {
          type: "delivery",
          attempt,
          headers: { ...delivery.headers, "idempotency-key": delivery.deliveryId },
          body: encodeBase64(delivery.body),
        });
      } catch {
        // Closed between the look and the send: nothing reached the listener.
        clearTimeout(timer);
        this.pending.delete(attempt);
        resolve(this.turnAway(delivery));
      }
    });
  }

  /**
   * Deliveries that died (retries spent, or refused outright): no later attempt will reach a listener, so they leave
   * the waiting list, which a new listener would otherwise read as still on its way. Called by the consumer once the
   * death is committed (src/consumers/deliveries/listen-deaths.ts).
   */
  forget(deliveryIds: readonly string[]): void {
    this.sql.exec(
      "DELETE FROM waiting WHERE delivery_id IN (SELECT value FROM json_each(?))",
      JSON.stringify(deliveryIds),
    );
  }

  override webSocketMessage(socket: WebSocket, frame: string | ArrayBuffer): void {
    const result = parseListenerResult(frame);
    const pending = result ? this.pending.get(result.attempt) : undefined;
    if (!result || !pending || pending.socket !== socket) return;
    this.sql.exec("DELETE FROM waiting WHERE delivery_id = ?", pending.deliveryId);
    pending.settle(outcomeOf(result));
  }

  override webSocketClose(socket: WebSocket): void {
    this.dropListener(socket);
  }

  override webSocketError(socket: WebSocket): void {
    this.dropListener(socket);
  }

  /** A listener gone with attempts in hand: each may have reached the local server, so none is a confident failure. */
  private dropListener(socket: WebSocket): void {
    for (const pending of [...this.pending.values()])
      if (pending.socket === socket)
        pending.settle({ kind: "no-answer", error: "the listener disconnected before answering" });
  }

  private turnAway(delivery: ListenDelivery): ListenOutcome {
    this.sql.exec(
      "INSERT OR IGNORE INTO waiting (delivery_id, source, event_key, event_type, since) VALUES (?, ?, ?, ?, ?)",
      delivery.deliveryId,
      delivery.source,
      delivery.eventKey,
      delivery.eventType,
      Date.now(),
    );
    this.sql.exec(
      "DELETE FROM waiting WHERE delivery_id NOT IN (SELECT delivery_id FROM waiting ORDER BY since DESC LIMIT ?)",
      WAITING_KEPT,
    );
    return { kind: "nobody-listening" };
  }

  private waitingList(): { waiting: WaitingDelivery[]; waitingCount: number } {
    const waitingCount = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM waiting").one().n;
    const waiting = this.sql
      .exec<{ delivery_id: string; source: string; event_key: string; event_type: string | null; since: number }>(
        "SELECT delivery_id, source, event_key, event_type, since FROM waiting ORDER BY since LIMIT ?",
        WAITING_SHOWN,
      )
      .toArray()
      .map((row) => ({
        deliveryId: row.delivery_id,
        source: row.source,
        eventKey: row.event_key,
        eventType: row.event_type,
        since: row.since,
      }));
    return { waiting, waitingCount };
  }

  private send(socket: WebSocket, message: HubMessage): void {
    socket.send(JSON.stringify(message));
  }
}
