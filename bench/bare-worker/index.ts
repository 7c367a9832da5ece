import { DurableObject } from "cloudflare:workers";

/**
 * The runtime's ceiling on this machine, and the floor any design pays that makes one Durable Object call before
 * it acknowledges. Same workerd, same wrangler dev proxy, same request shape as the receiver gets.
 *
 * - any path: (a) read the whole body, answer 200.
 * - FLOOR_RPC_PATH: (d) read the body, one RPC carrying it to a trivial Durable Object that stores nothing.
 * - FLOOR_WRITE_PATH: (e) the same RPC, and the object inserts one small row (the key and the body) before it
 *   answers, so the answer waits for that write to be durable, as a claim's does.
 *
 * The objects are chosen like the receiver's claim shards: FNV-1a of the event key over eight objects.
 */
const FLOOR_RPC_PATH = "/floor/rpc";
const FLOOR_WRITE_PATH = "/floor/write";
const FLOOR_SHARDS = 8;

interface FloorEnv {
  FLOOR: {
    idFromName(name: string): unknown;
    get(id: unknown): {
      touch(key: string, body: ArrayBuffer): Promise<number>;
      write(key: string, body: ArrayBuffer): Promise<number>;
    };
  };
}

export class FloorShard extends DurableObject<FloorEnv> {
  constructor(ctx: DurableObject["ctx"], env: FloorEnv) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS floor_rows (key TEXT PRIMARY KEY, body BLOB NOT NULL) WITHOUT ROWID",
    );
  }

  /** (d): the round trip alone. */
  touch(_key: string, body: ArrayBuffer): number {
    return body.byteLength;
  }

  /** (e): the round trip and one durable row; the output gate holds the answer until it is written. */
  write(key: string, body: ArrayBuffer): number {
    this.ctx.storage.sql.exec("INSERT OR IGNORE INTO floor_rows (key, body) VALUES (?, ?)", key, body);
    return body.byteLength;
  }
}

export default {
  async fetch(request: Request, env: FloorEnv): Promise<Response> {
    if (request.method !== "POST") return new Response("ok");
    const body = await request.arrayBuffer();
    const path = request.url.slice(request.url.indexOf("/", request.url.indexOf("//") + 2));
    if (path !== FLOOR_RPC_PATH && path !== FLOOR_WRITE_PATH) return new Response("ok");
    const key = request.headers.get("webhook-id") ?? "";
    const stub = env.FLOOR.get(env.FLOOR.idFromName(`floor#${fnv1a(key) % FLOOR_SHARDS}`));
    await (path === FLOOR_WRITE_PATH ? stub.write(key, body) : stub.touch(key, body));
    return new Response("ok");
  },
};

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
