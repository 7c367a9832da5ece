import { type ChildProcess, spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";

/**
 * A stand-in for the provider APIs the reconciler calls, speaking their documented shapes:
 *   Stripe  GET  /v1/events?created[gte]=&created[lte]=&limit=&starting_after=   newest first, {object:"list", data, has_more}
 *           GET  /v1/webhook_endpoints/:id                                     the endpoint (enabled_events, livemode), or 404
 *   GitHub  GET  /repos/:owner/:repo/hooks/:hook/deliveries?per_page=&cursor=   newest first, Link rel="next"
 *           POST /repos/:owner/:repo/hooks/:hook/deliveries/:delivery/attempts  202
 * plus sinks that record what the receiver sends out (forwards, alerts).
 *
 * Every path starts with a namespace segment (`/<ns>/v1/events`), so each test source has its own state. Tests
 * seed and read state through `/<ns>/_control/*`. State is only ever added to, never reset: the test files of one
 * vitest process share its stand-in, and use keys unique to themselves.
 *
 * Each vitest process starts its own, on a port the OS picks (startReconcileStandin, from vitest.config.ts), and the
 * fixtures name it at FIXTURE_RECONCILE_ORIGIN, which the config points at that port: two runs on one machine (two
 * lanes of `npm test`, or two working trees) never share or replace each other's.
 */

/** Where test/fixtures/sources/reconcile.json and test/fixtures/secrets/reconcile.json name the stand-in. */
export const FIXTURE_RECONCILE_ORIGIN = "http://127.0.0.1:8800";

interface StripeEvent {
  id: string;
  created: number;
  [field: string]: unknown;
}

interface GithubDelivery {
  id: number;
  guid: string;
  delivered_at: string;
  redelivery: boolean;
  status_code: number;
  [field: string]: unknown;
}

interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

interface Namespace {
  stripeEvents: StripeEvent[];
  stripeEndpoints: Map<string, Record<string, unknown>>;
  githubDeliveries: GithubDelivery[];
  /** Answer provider API calls with this status instead (outage simulation)... */
  failWith: number | null;
  /**
   * ...only the Stripe event lists whose scan began at this moment (`created[lte]`, epoch seconds), when set. Every
   * test file's cron run lists every namespace, and the files of one process share this server: an outage for all
   * would show up as a failure in another file's run.
   */
  failUntil: number | null;
  requests: RecordedRequest[];
}

const namespaces = new Map<string, Namespace>();

function namespace(name: string): Namespace {
  let found = namespaces.get(name);
  if (!found) {
    found = {
      stripeEvents: [],
      stripeEndpoints: new Map(),
      githubDeliveries: [],
      failWith: null,
      failUntil: null,
      requests: [],
    };
    namespaces.set(name, found);
  }
  return found;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function sendJson(
  response: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify(value, null, 2);
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
    ...headers,
  });
  response.end(body);
}

const EXPECTED_KEYS: Record<string, string> = {
  stripe: "sk_test_reconcile_stand_in",
  github: "ghp_reconcile_stand_in",
};

function authorized(request: IncomingMessage, provider: "stripe" | "github"): boolean {
  return request.headers.authorization === `Bearer ${EXPECTED_KEYS[provider]}`;
}

function listStripeEvents(state: Namespace, url: URL, response: ServerResponse): void {
  const createdGte = Number(url.searchParams.get("created[gte]") ?? 0);
  const createdLte = Number(url.searchParams.get("created[lte]") ?? Number.MAX_SAFE_INTEGER);
  const limit = Math.min(100, Number(url.searchParams.get("limit") ?? 10));
  const startingAfter = url.searchParams.get("starting_after");
  const ordered = state.stripeEvents
    .filter((event) => event.created >= createdGte && event.created <= createdLte)
    .sort((a, b) => b.created - a.created || (a.id < b.id ? 1 : -1));
  let start = 0;
  if (startingAfter) {
    const index = ordered.findIndex((event) => event.id === startingAfter);
    if (index < 0) {
      sendJson(response, 400, {
        error: { type: "invalid_request_error", message: `No such event: '${startingAfter}'`, param: "starting_after" },
      });
      return;
    }
    start = index + 1;
  }
  const page = ordered.slice(start, start + limit);
  sendJson(response, 200, { object: "list", url: "/v1/events", has_more: start + limit < ordered.length, data: page });
}

function listGithubDeliveries(state: Namespace, url: URL, response: ServerResponse): void {
  const perPage = Math.min(100, Number(url.searchParams.get("per_page") ?? 30));
  const cursor = Number(url.searchParams.get("cursor") ?? 0);
  const ordered = [...state.githubDeliveries].sort(
    (a, b) => Date.parse(b.delivered_at) - Date.parse(a.delivered_at) || b.id - a.id,
  );
  const page = ordered.slice(cursor, cursor + perPage);
  const headers: Record<string, string> = {};
  if (cursor + perPage < ordered.length) {
    const next = new URL(url);
    next.searchParams.set("cursor", String(cursor + perPage));
    headers.link = `<${next.toString()}>; rel="next"`;
  }
  sendJson(response, 200, page, headers);
}

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  // The port is the OS's pick: links back to this server name the host the caller used.
  const url = new URL(request.url ?? "/", `http://${request.headers.host ?? "127.0.0.1"}`);
  if (url.pathname === "/_identity") {
    response.end("reconcile-stand-in");
    return;
  }
  const [, namespaceName = "", ...rest] = url.pathname.split("/");
  const path = `/${rest.join("/")}`;
  const state = namespace(namespaceName);
  const body = await readBody(request);

  if (path.startsWith("/_control/")) {
    const control = path.slice("/_control/".length);
    if (control === "stripe-events" && request.method === "POST") {
      state.stripeEvents.push(...(JSON.parse(body) as StripeEvent[]));
      return sendJson(response, 200, { count: state.stripeEvents.length });
    }
    if (control === "stripe-endpoint" && request.method === "POST") {
      const endpoint = JSON.parse(body) as { id: string };
      state.stripeEndpoints.set(endpoint.id, { object: "webhook_endpoint", status: "enabled", ...endpoint });
      return sendJson(response, 200, { count: state.stripeEndpoints.size });
    }
    if (control === "github-deliveries" && request.method === "POST") {
      state.githubDeliveries.push(...(JSON.parse(body) as GithubDelivery[]));
      return sendJson(response, 200, { count: state.githubDeliveries.length });
    }
    if (control === "fail-with" && request.method === "POST") {
      const outage = JSON.parse(body) as { status: number | null; until?: number };
      state.failWith = outage.status;
      state.failUntil = outage.until ?? null;
      return sendJson(response, 200, { failWith: state.failWith, failUntil: state.failUntil });
    }
    if (control === "requests" && request.method === "GET") return sendJson(response, 200, state.requests);
    return sendJson(response, 404, { error: "unknown control" });
  }

  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === "string") headers[name] = value;
  }
  state.requests.push({ method: request.method ?? "GET", path: `${path}${url.search}`, headers, body });

  if (path === "/sink") return sendJson(response, 200, { received: true });

  const stripeEndpoint = /^\/v1\/webhook_endpoints\/([^/]+)$/.exec(path);
  const isStripe = path === "/v1/events" || stripeEndpoint !== null;
  const githubList = /^\/(?:repos\/[^/]+\/[^/]+|orgs\/[^/]+)\/hooks\/\d+\/deliveries$/.test(path);
  const githubRedeliver = /^\/(?:repos\/[^/]+\/[^/]+|orgs\/[^/]+)\/hooks\/\d+\/deliveries\/\d+\/attempts$/.test(path);
  if (!isStripe && !githubList && !githubRedeliver) return sendJson(response, 404, { message: "Not Found" });
  const failing =
    state.failWith !== null &&
    (state.failUntil === null || url.searchParams.get("created[lte]") === String(state.failUntil));
  if (failing) return sendJson(response, state.failWith!, { error: { message: "stand-in outage" } });
  if (!authorized(request, isStripe ? "stripe" : "github")) {
    return isStripe
      ? sendJson(response, 401, { error: { type: "invalid_request_error", message: "Invalid API Key provided" } })
      : sendJson(response, 401, { message: "Bad credentials" });
  }
  if (stripeEndpoint && request.method === "GET") {
    const endpoint = state.stripeEndpoints.get(decodeURIComponent(stripeEndpoint[1]!));
    return endpoint
      ? sendJson(response, 200, endpoint)
      : sendJson(response, 404, {
          error: { type: "invalid_request_error", message: `No such webhook endpoint: '${stripeEndpoint[1]}'` },
        });
  }
  if (isStripe && request.method === "GET") return listStripeEvents(state, url, response);
  if (githubList && request.method === "GET") {
    if (!request.headers["user-agent"]) return sendJson(response, 403, { message: "User-Agent header required" });
    return listGithubDeliveries(state, url, response);
  }
  if (githubRedeliver && request.method === "POST") return sendJson(response, 202, {});
  return sendJson(response, 405, { message: "Method Not Allowed" });
}

/** Shuts the server down after this long without a request. */
const IDLE_EXIT_MS = 10 * 60_000;

/**
 * The server, in a child process of the vitest process that started it: it tells the parent its port over IPC, and
 * exits when the parent goes (the IPC channel closes) or after ten idle minutes, whichever comes first.
 */
function serve(): void {
  let lastRequestAt = Date.now();
  const server: Server = createServer((request, response) => {
    lastRequestAt = Date.now();
    handle(request, response).catch((error: unknown) => {
      response.writeHead(500);
      response.end(String(error));
    });
  });
  // workerd pools connections; closing an idle one sooner than it expects surfaces as "connection lost".
  server.keepAliveTimeout = 120_000;
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    process.send?.({ port: typeof address === "object" && address ? address.port : 0 });
  });
  process.on("disconnect", () => process.exit(0));
  setInterval(() => {
    if (Date.now() - lastRequestAt > IDLE_EXIT_MS) server.close(() => process.exit(0));
  }, 30_000).unref();
}

/** Stripe webhook endpoints named by test/fixtures/sources/reconcile.json (`catch_up.endpoint`). */
const FIXTURE_ENDPOINTS = [
  {
    namespace: "reconcile-stripe-endpoint",
    endpoint: { id: "we_reconcile_endpoint", enabled_events: ["customer.created"], livemode: false },
  },
];

const RUNNING_STANDIN = Symbol.for("edge-webhook-receiver.reconcile-stand-in");

interface RunningStandin {
  child: ChildProcess;
  port: number;
}

/**
 * Starts this process's stand-in once and answers its port, with the endpoints the fixture sources name seeded
 * before any test's cron run reaches them (every run's catch-up reads them).
 */
export async function startReconcileStandin(): Promise<number> {
  const holder = globalThis as { [RUNNING_STANDIN]?: RunningStandin };
  const running = holder[RUNNING_STANDIN];
  if (running) return running.port;
  const child = spawn(
    process.execPath,
    ["--experimental-strip-types", "--no-warnings", fileURLToPath(import.meta.url), "--serve"],
    { stdio: ["ignore", "ignore", "inherit", "ipc"] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once("message", (message: { port: number }) => resolve(message.port));
    // A stand-in that dies before it listens fails the run at once, naming itself, rather than hanging it.
    child.once("exit", (code) => reject(new Error(`the reconcile stand-in exited (${code}) before it listened`)));
  });
  // Never the reason the vitest process stays alive; the child exits when that process goes.
  child.unref();
  child.channel?.unref();
  holder[RUNNING_STANDIN] = { child, port };
  for (const { namespace: name, endpoint } of FIXTURE_ENDPOINTS) {
    await fetch(`http://127.0.0.1:${port}/${name}/_control/stripe-endpoint`, {
      method: "POST",
      body: JSON.stringify(endpoint),
    });
  }
  return port;
}

/** vitest global setup: the stand-in vitest.config.ts started (or a new one), stopped when the run ends. */
export default async function setup(): Promise<() => void> {
  await startReconcileStandin();
  return () => {
    const holder = globalThis as { [RUNNING_STANDIN]?: RunningStandin };
    holder[RUNNING_STANDIN]?.child.kill();
    delete holder[RUNNING_STANDIN];
  };
}

if (process.argv.includes("--serve")) serve();
