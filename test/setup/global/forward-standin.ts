import type { IncomingMessage, RequestListener, Server, ServerResponse } from "node:http";
import type { TestProject } from "vitest/node";

/**
 * A stand-in for a user's backend that forward destinations (and handlers' external calls) point at, on
 * 127.0.0.1:8793 (or the next free port, reserved by vitest.config.ts). Its behaviour is chosen by the path, so a test source's URL says what it will meet:
 *
 *   /ok                         204 to everything
 *   /status/<code>              always <code>
 *   /script/<step>,<step>,…     the n-th request carrying one Idempotency-Key gets step n (the last repeats);
 *                               a step is a status ("500", "200"), "429:<seconds>" (429 with Retry-After), or
 *                               "hang" (answers only after 3 s, long after the caller's timeout)
 *   /poison                     500 when the body contains "poison", 200 otherwise
 *   /when/<marker>/<steps>      a body containing <marker> follows the script <steps> (as /script/), any other 204
 *   /slow/<ms>                  204, answered only after <ms> (a destination that is slow but answers in time)
 *   /lane/<name>/<path>         as <path> above, unless PUT /__lane/<name>?status=<code> set the lane's answer
 *                               (with &match=<text>, only for bodies containing <text>: lanes are shared by test
 *                               files running at once; status=0 clears it);
 *                               each request is also recorded per lane with how many of the lane's requests were
 *                               open when it arrived (itself included), for tests of delivery control
 *   GET /__lane/<name>          what arrived in that lane, in arrival order
 *   GET /__requests?key=<key>   what arrived under that Idempotency-Key: headers, body, answer
 *   GET /__standin              identifies the server
 *
 * Requests are grouped by Idempotency-Key (receipt ids), so each event follows its own script.
 */

/** 8793 is the one the fixtures name; 8798 is kept free on purpose (the refused-connection source). */
const STANDIN_PORTS = [8793, 8794, 8795, 8796, 8797];
const HANG_MS = 3_000;

interface RecordedRequest {
  path: string;
  /** Requests of this lane open when this one arrived, itself included (lanes only). */
  openOnArrival?: number;
  headers: Record<string, string>;
  body: string;
  answer: number | "hung";
  receivedAt: number;
}

declare module "vitest" {
  export interface ProvidedContext {
    forwardStandinOrigin: string;
  }
}

/** Where vitest.config.ts leaves the server it reserved this run's port with (same process). */
const RESERVED_STANDIN = Symbol.for("edge-webhook-receiver.forward-standin");

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Several engineers' test runs share this machine: each run gets its own stand-in on the first free port.
  // vitest.config.ts reserved that port (and pointed the fixture sources at it): serve on its server.
  const reserved = (globalThis as { [RESERVED_STANDIN]?: Server })[RESERVED_STANDIN];
  const address = reserved?.address();
  if (reserved && address && typeof address === "object") {
    reserved.on("request", standinHandler());
    // The caller gives up on hung requests; a dropped socket is expected here, not an error.
    reserved.on("clientError", (_error, socket) => socket.destroy());
    project.provide("forwardStandinOrigin", `http://127.0.0.1:${address.port}`);
    return () => new Promise<void>((resolve) => reserved.close(() => resolve()));
  }
  console.warn(`forward stand-in: ports ${STANDIN_PORTS.join(", ")} are all taken; forward tests will fail`);
  project.provide("forwardStandinOrigin", `http://127.0.0.1:${STANDIN_PORTS[0]}`);
  return async () => {};
}

interface Lane {
  requests: RecordedRequest[];
  open: number;
  status: number | null;
  /** The set status answers only bodies containing this (null: every body). */
  match: string | null;
}

function standinHandler(): RequestListener {
  const byKey = new Map<string, RecordedRequest[]>();
  const lanes = new Map<string, Lane>();
  const laneNamed = (name: string) =>
    lanes.get(name) ?? lanes.set(name, { requests: [], open: 0, status: null, match: null }).get(name)!;
  return async (request, response) => {
    // No keep-alive: a pooled socket that the server closes just as workerd reuses it shows up as a spurious
    // "Network connection lost", and the tests assert exact attempt histories.
    response.setHeader("connection", "close");
    const url = new URL(request.url ?? "/", "http://standin");
    if (request.method === "GET" && url.pathname === "/__standin") return json(response, 200, { standin: "forward" });
    if (request.method === "GET" && url.pathname === "/__requests") {
      return json(response, 200, byKey.get(url.searchParams.get("key") ?? "") ?? []);
    }
    const laneControl = /^\/__lane\/([a-z0-9-]+)$/.exec(url.pathname);
    if (laneControl && request.method === "GET") return json(response, 200, laneNamed(laneControl[1]!).requests);
    if (laneControl && request.method === "PUT") {
      const controlled = laneNamed(laneControl[1]!);
      controlled.status = Number(url.searchParams.get("status"));
      controlled.match = url.searchParams.get("match");
      return json(response, 200, { ok: true });
    }
    const laneMatch = /^\/lane\/([a-z0-9-]+)(\/.*)$/.exec(url.pathname);
    const lane = laneMatch ? laneNamed(laneMatch[1]!) : null;
    if (lane) {
      lane.open += 1;
      response.once("close", () => (lane.open -= 1));
    }
    const body = await readBody(request);
    const key = header(request, "idempotency-key") ?? "(none)";
    const seen = byKey.get(key) ?? [];
    byKey.set(key, seen);
    const record: RecordedRequest = {
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
        : chooseStep(laneMatch ? laneMatch[2]! : url.pathname, seen.length, body);
    if (typeof step === "object" && step.afterMs !== undefined) {
      record.answer = step.status;
      setTimeout(() => {
        if (!response.destroyed) {
          response.writeHead(step.status);
          response.end();
        }
      }, step.afterMs);
      return;
    }
    if (step === "hang") {
      record.answer = "hung";
      setTimeout(() => {
        if (!response.destroyed) json(response, 200, { late: true });
      }, HANG_MS);
      return;
    }
    record.answer = step.status;
    response.writeHead(step.status, step.retryAfter === undefined ? {} : { "retry-after": String(step.retryAfter) });
    response.end();
  };
}

type Step = "hang" | { status: number; retryAfter?: number; afterMs?: number };

function chooseStep(path: string, requestNumber: number, body: string): Step {
  if (path === "/ok") return { status: 204 };
  const status = /^\/status\/(\d{3})$/.exec(path);
  if (status) return { status: Number(status[1]) };
  if (path === "/poison") return { status: body.includes("poison") ? 500 : 200 };
  const marked = /^\/when\/([a-z0-9-]+)\/([^/]+)$/.exec(path);
  if (marked)
    return body.includes(marked[1]!) ? chooseStep(`/script/${marked[2]}`, requestNumber, body) : { status: 204 };
  const slow = /^\/slow\/(\d{1,6})$/.exec(path);
  if (slow) return { status: 204, afterMs: Number(slow[1]) };
  const script = /^\/script\/([^/]+)$/.exec(path);
  if (script) {
    const steps = script[1]!.split(",");
    const step = steps[Math.min(requestNumber, steps.length) - 1]!;
    if (step === "hang") return "hang";
    const [code, retryAfter] = step.split(":");
    return { status: Number(code), retryAfter: retryAfter === undefined ? undefined : Number(retryAfter) };
  }
  return { status: 404 };
}

function header(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function json(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(value));
}
