import http from "node:http";
import type { AddressInfo } from "node:net";

/** One forward as the backend saw it: which path (route) it reached, its delivery id and the event it carries. */
export interface ForwardSeen {
  path: string;
  /** `Idempotency-Key`: the receipt id, or `<receipt id>:<route>` for a source with several routes. */
  idempotencyKey: string;
  /** `x-webhook-event-key`: the sender's key of the event forwarded. */
  eventKey: string;
  /** When it arrived (performance.now(), ms). */
  at: number;
}

/**
 * The user's backend for a forward destination: answers 200 to every forward, on a free port, and records what it
 * answered (path, delivery id, event key), so a phase can count each route's deliveries. It checks no signature:
 * the forward path's signing is proven by the test suite. For the faulted soak it can be taken down (every
 * forward answered 503 meanwhile, counted apart) and, given `keyOf`, counts the forwards it answered 200 per event
 * key, so a forward lost or sent again shows.
 */
export async function startForwardBackend(keyOf?: (body: string) => string | null): Promise<{
  port: number;
  received: () => number;
  /** Every forward answered 200, in arrival order. */
  seen: () => readonly ForwardSeen[];
  /** Forwards answered 503 while down. */
  refused: () => number;
  /** Forwards answered 200, per key `keyOf` found in the body. */
  answeredPerKey: () => ReadonlyMap<string, number>;
  setDown: (down: boolean) => void;
  close: () => Promise<void>;
}> {
  const seen: ForwardSeen[] = [];
  let refused = 0;
  let down = false;
  const perKey = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => {
      if (keyOf) chunks.push(chunk);
    });
    request.on("end", () => {
      if (down) {
        refused++;
        response.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
        return;
      }
      seen.push({
        path: new URL(request.url ?? "/", "http://backend").pathname,
        idempotencyKey: String(request.headers["idempotency-key"] ?? ""),
        eventKey: String(request.headers["x-webhook-event-key"] ?? ""),
        at: performance.now(),
      });
      const key = keyOf ? keyOf(Buffer.concat(chunks).toString("utf8")) : null;
      if (key !== null) perKey.set(key, (perKey.get(key) ?? 0) + 1);
      response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received: () => seen.length,
    seen: () => seen,
    refused: () => refused,
    answeredPerKey: () => perKey,
    setDown: (value) => {
      down = value;
    },
    close: () =>
      new Promise((resolve) => {
        // Keep-alive sockets of a killed runtime would hold close() open.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
