// The forward stand-in's HTTP server (what it answers: test/setup/global/forward-standin.ts). It runs in a worker
// thread of its own, started by vitest.config.ts before the fixtures are pointed at it, not on the Vitest process's
// event loop: that loop also serves every test file's modules and RPC, and with two files at once at a load average
// of 17 it stalled past the receiver's 10 s forward timeout, so a slow destination's answer came too late.
// Plain JavaScript, so the thread starts on any Node the project supports.
import { createServer } from "node:http";
import { workerData } from "node:worker_threads";
import { servedFromThread } from "./thread-server.mjs";

/** Answers only after this long, long after the caller's timeout. */
const HANG_MS = 3_000;
/**
 * A gathering lane's requests (`/gather/<n>`) answer together once n are open at once, or at the latest after this
 * long (inside the receiver's 10 s forward timeout), so a lane that never gathers n still answers each.
 */
const GATHER_CAP_MS = 8_000;

/**
 * @typedef {{ path: string; openOnArrival?: number; headers: Record<string, string>; body: string;
 *   answer: number | "hung"; receivedAt: number }} RecordedRequest
 * @typedef {{ requests: RecordedRequest[]; open: number; status: number | null; match: string | null;
 *   gathering: Array<() => void> }} Lane
 * @typedef {"hang" | { status: number; retryAfter?: number; afterMs?: number; gather?: number }} Step
 */

/** @type {Map<string, RecordedRequest[]>} requests by Idempotency-Key */
const byKey = new Map();
/** @type {Map<string, Lane>} */
const lanes = new Map();
/** @param {string} name */
const laneNamed = (name) => {
  let lane = lanes.get(name);
  if (!lane) {
    lane = { requests: [], open: 0, status: null, match: null, gathering: [] };
    lanes.set(name, lane);
  }
  return lane;
};

const server = createServer(async (request, response) => {
  // No keep-alive: a pooled socket that the server closes just as workerd reuses it shows up as a spurious
  // "Network connection lost", and the tests assert exact attempt histories.
  response.setHeader("connection", "close");
  const url = new URL(request.url ?? "/", "http://standin");
  if (request.method === "GET" && url.pathname === "/__standin") return json(response, 200, { standin: "forward" });
  if (request.method === "GET" && url.pathname === "/__requests") {
    return json(response, 200, byKey.get(url.searchParams.get("key") ?? "") ?? []);
  }
  const laneControl = /^\/__lane\/([a-z0-9-]+)$/.exec(url.pathname);
  if (laneControl && request.method === "GET") return json(response, 200, laneNamed(laneControl[1]).requests);
  if (laneControl && request.method === "PUT") {
    const controlled = laneNamed(laneControl[1]);
    controlled.status = Number(url.searchParams.get("status"));
    controlled.match = url.searchParams.get("match");
    return json(response, 200, { ok: true });
  }
  const laneMatch = /^\/lane\/([a-z0-9-]+)(\/.*)$/.exec(url.pathname);
  const lane = laneMatch ? laneNamed(laneMatch[1]) : null;
  if (lane) {
    lane.open += 1;
    response.once("close", () => {
      lane.open -= 1;
    });
  }
  const body = await readBody(request);
  const key = headerValue(request.headers["idempotency-key"]) ?? "(none)";
  const seen = byKey.get(key) ?? [];
  byKey.set(key, seen);
  /** @type {RecordedRequest} */
  const record = {
    path: url.pathname,
    headers: Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)])),
    body,
    answer: 0,
    receivedAt: Date.now(),
  };
  seen.push(record);
  if (lane) {
    record.openOnArrival = lane.open;
    lane.requests.push(record);
  }
  const step =
    lane?.status && (lane.match === null || body.includes(lane.match))
      ? { status: lane.status }
      : chooseStep(laneMatch ? laneMatch[2] : url.pathname, seen.length, body);
  if (typeof step === "object" && step.afterMs !== undefined) {
    record.answer = step.status;
    setTimeout(() => {
      if (!response.destroyed) {
        response.writeHead(step.status);
        response.end();
      }
    }, step.afterMs).unref();
    return;
  }
  if (typeof step === "object" && step.gather !== undefined && lane) {
    record.answer = step.status;
    const answer = () => {
      if (!response.destroyed) {
        response.writeHead(step.status);
        response.end();
      }
    };
    const cap = setTimeout(() => {
      lane.gathering = lane.gathering.filter((waiting) => waiting !== release);
      answer();
    }, GATHER_CAP_MS).unref();
    const release = () => {
      clearTimeout(cap);
      answer();
    };
    lane.gathering.push(release);
    if (lane.open >= step.gather) for (const waiting of lane.gathering.splice(0)) waiting();
    return;
  }
  if (step === "hang") {
    record.answer = "hung";
    setTimeout(() => {
      if (!response.destroyed) json(response, 200, { late: true });
    }, HANG_MS).unref();
    return;
  }
  record.answer = step.status;
  response.writeHead(step.status, step.retryAfter === undefined ? {} : { "retry-after": String(step.retryAfter) });
  response.end();
});
// The caller gives up on hung requests; a dropped socket is expected here, not an error.
server.on("clientError", (_error, socket) => socket.destroy());

/**
 * @param {string} path
 * @param {number} requestNumber
 * @param {string} body
 * @returns {Step}
 */
function chooseStep(path, requestNumber, body) {
  if (path === "/ok") return { status: 204 };
  const status = /^\/status\/(\d{3})$/.exec(path);
  if (status) return { status: Number(status[1]) };
  if (path === "/poison") return { status: body.includes("poison") ? 500 : 200 };
  const marked = /^\/when\/([a-z0-9-]+)\/([^/]+)$/.exec(path);
  if (marked)
    return body.includes(marked[1]) ? chooseStep(`/script/${marked[2]}`, requestNumber, body) : { status: 204 };
  const slow = /^\/slow\/(\d{1,6})$/.exec(path);
  if (slow) return { status: 204, afterMs: Number(slow[1]) };
  const gather = /^\/gather\/(\d{1,3})$/.exec(path);
  if (gather) return { status: 204, gather: Number(gather[1]) };
  const script = /^\/script\/([^/]+)$/.exec(path);
  if (script) {
    const steps = script[1].split(",");
    const step = steps[Math.min(requestNumber, steps.length) - 1];
    if (step === "hang") return "hang";
    const [code, retryAfter] = step.split(":");
    return { status: Number(code), retryAfter: retryAfter === undefined ? undefined : Number(retryAfter) };
  }
  return { status: 404 };
}

/** @param {string | string[] | undefined} value */
function headerValue(value) {
  return Array.isArray(value) ? value[0] : value;
}

/** @param {import("node:http").IncomingMessage} request @returns {Promise<string>} */
async function readBody(request) {
  /** @type {Buffer[]} */
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/** @param {import("node:http").ServerResponse} response @param {number} status @param {unknown} value */
function json(response, status, value) {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(value));
}

/** @param {number} port @returns {Promise<boolean>} whether this server now listens on it */
function listenOn(port) {
  return new Promise((resolve) => {
    const refused = () => resolve(false);
    server.once("error", refused);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", refused);
      resolve(true);
    });
  });
}

// The preferred ports in order (another run on this machine may hold the first), then any port the OS picks. The
// port is bound here, in the thread that serves it, before the parent points the fixtures at it: nothing can take
// it in between.
/** @type {number[]} */
const preferred = workerData?.ports ?? [];
let bound = false;
for (const port of preferred) {
  if (await listenOn(port)) {
    bound = true;
    break;
  }
}
if (!bound) await listenOn(0);
servedFromThread(server);
