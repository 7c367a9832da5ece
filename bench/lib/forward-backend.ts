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
 * What the backend heard for one `x-webhook-event-key` (given `keyOf`): forwards answered 200 and 503, and the size
 * of each body answered 200 whose key `keyOf` could not read or read as another key (sizes only, never the bytes).
 */
export interface HeardOf {
  answered: number;
  refused: number;
  unreadableSizes: number[];
  otherKeys: string[];
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
  /** Every forward answered, per `x-webhook-event-key` header (given `keyOf`): what a lost key's report shows. */
  heardOf: (eventKey: string) => HeardOf | null;
  setDown: (down: boolean) => void;
  close: () => Promise<void>;
}> {
  const seen: ForwardSeen[] = [];
  let refused = 0;
  let down = false;
  const perKey = new Map<string, number>();
  const perEventKey = new Map<string, HeardOf>();
  const heard = (eventKey: string): HeardOf => {
    let entry = perEventKey.get(eventKey);
    if (!entry) {
      entry = { answered: 0, refused: 0, unreadableSizes: [], otherKeys: [] };
      perEventKey.set(eventKey, entry);
    }
    return entry;
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => {
      if (keyOf) chunks.push(chunk);
    });
    request.on("end", () => {
      const eventKey = String(request.headers["x-webhook-event-key"] ?? "");
      if (down) {
        refused++;
        if (keyOf) heard(eventKey).refused++;
        response.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
        return;
      }
      seen.push({
        path: new URL(request.url ?? "/", "http://backend").pathname,
        idempotencyKey: String(request.headers["idempotency-key"] ?? ""),
        eventKey,
        at: performance.now(),
      });
      if (keyOf) {
        const body = Buffer.concat(chunks);
        const key = keyOf(body.toString("utf8"));
        if (key !== null) perKey.set(key, (perKey.get(key) ?? 0) + 1);
        const entry = heard(eventKey);
        entry.answered++;
        if (key === null) entry.unreadableSizes.push(body.byteLength);
        else if (key !== eventKey) entry.otherKeys.push(key);
      }
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
    heardOf: (eventKey) => perEventKey.get(eventKey) ?? null,
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
