// The key stand-in's HTTP server (what it answers: test/setup/global/key-standin.ts). It runs in a worker thread of
// its own, not on the Vitest process's event loop: that loop also serves every test file's modules, and with two
// files at once it has stalled for seconds, long enough for the receiver's 3 s key-fetch timeout to turn a test's
// certificate fetch into a 503. Plain JavaScript, so the thread starts on any Node the project supports.
import { createServer } from "node:http";
import { servedFromThread } from "./thread-server.mjs";

const HANG_MS = 5_000;

/** @type {Map<string, string>} */
const served = new Map();
/** @type {Map<string, { secret?: string; key?: unknown; answer?: "down" | "hang" }>} */
const plaidKeys = new Map();
/** @type {Set<string>} */
const plaidSecrets = new Set();
/** @type {Map<string, number>} */
const fetches = new Map();

const server = createServer(async (request, response) => {
  response.setHeader("connection", "close");
  const url = new URL(request.url ?? "/", "http://standin");
  const body = await new Promise((resolve) => {
    /** @type {Buffer[]} */
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });
  /** @param {number} status @param {string} [text] @param {string} [type] */
  const answer = (status, text = "", type = "text/plain") => {
    response.writeHead(status, { "content-type": type });
    response.end(text);
  };
  if (request.method === "PUT" && url.pathname.startsWith("/__serve/")) {
    served.set(url.pathname.slice("/__serve".length), body);
    return answer(204);
  }
  if (request.method === "PUT" && url.pathname.startsWith("/__plaid/")) {
    /** @type {{ secret?: string; key?: unknown; answer?: "down" | "hang" }} */
    const published = JSON.parse(body);
    plaidKeys.set(decodeURIComponent(url.pathname.slice("/__plaid/".length)), published);
    if (published.secret !== undefined) plaidSecrets.add(published.secret);
    return answer(204);
  }
  if (request.method === "GET" && url.pathname === "/__fetches") {
    const kid = url.searchParams.get("kid");
    return answer(200, String(fetches.get(kid !== null ? `kid:${kid}` : (url.searchParams.get("path") ?? "")) ?? 0));
  }

  const fetched = `${url.pathname}${url.search}`;
  fetches.set(fetched, (fetches.get(fetched) ?? 0) + 1);
  if (request.method === "GET" && served.has(url.pathname)) return answer(200, served.get(url.pathname));
  const status = /^\/status-(\d{3})\//.exec(url.pathname);
  if (status) return answer(Number(status[1]));
  if (url.pathname.startsWith("/hang/")) {
    setTimeout(() => answer(200, "too late"), HANG_MS).unref();
    return;
  }
  if (request.method === "GET" && url.pathname === "/" && url.searchParams.get("Action") === "ConfirmSubscription") {
    return (url.searchParams.get("Token") ?? "").startsWith("down")
      ? answer(503)
      : answer(200, "<ConfirmSubscriptionResponse/>", "text/xml");
  }
  if (request.method === "POST" && url.pathname === "/webhook_verification_key/get") {
    /** @type {{ secret?: string; key_id?: string }} */
    const asked = JSON.parse(body || "{}");
    const kid = asked.key_id ?? "";
    fetches.set(`kid:${kid}`, (fetches.get(`kid:${kid}`) ?? 0) + 1);
    const known = plaidKeys.get(kid);
    if (known?.answer === "down") return answer(503);
    if (known?.answer === "hang") {
      setTimeout(() => answer(503), HANG_MS).unref();
      return;
    }
    if (!plaidSecrets.has(asked.secret ?? "") || (known && known.secret !== asked.secret)) {
      return answer(
        400,
        JSON.stringify({ error_type: "INVALID_INPUT", error_code: "INVALID_API_KEYS" }),
        "application/json",
      );
    }
    if (!known)
      return answer(
        400,
        JSON.stringify({ error_type: "INVALID_INPUT", error_code: "INVALID_WEBHOOK_VERIFICATION_KEY_ID" }),
        "application/json",
      );
    return answer(200, JSON.stringify({ key: known.key, request_id: "standin" }), "application/json");
  }
  return answer(404);
});
server.on("clientError", (_error, socket) => socket.destroy());
server.listen(0, "127.0.0.1", () => servedFromThread(server));
