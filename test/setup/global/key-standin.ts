import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { TestProject } from "vitest/node";

/**
 * A stand-in for the hosts senders publish keys on (AWS SNS's signing certificates and subscribe URLs, Plaid's
 * /webhook_verification_key/get), on a free loopback port the OS picks. Tests send pinned fetches here with
 * `redirectKeyFetchesForTests` (src/providers/key-fetch.ts), which keeps the path and query, so a test chooses
 * what a fetch meets by the path of the URL it signs:
 *
 *   PUT  /__serve/<path>             afterwards GET <path> answers 200 with the PUT body (a certificate)
 *   GET  /status-<code>/…            always <code> (a host that fails or refuses)
 *   GET  /hang/…                     answers only after 5 s, past the receiver's fetch timeout
 *   GET  /?Action=ConfirmSubscription&Token=<t>   200 and recorded (a token starting "down" gets 503)
 *   PUT  /__plaid/<kid>              {secret, key}: the key Plaid returns for that id when asked with that secret
 *                                    (a secret that has published a key is a valid API secret), or
 *                                    {answer: "down"} (503 for that id) or {answer: "hang"} (answers after 5 s)
 *   POST /webhook_verification_key/get   Plaid's key endpoint: 200 {key}; 400 INVALID_API_KEYS for a secret
 *                                    that published no key, 400 with another code for an unknown id
 *   GET  /__fetches?path=<path>      how many fetches reached <path> (path and query, as fetched)
 *   GET  /__fetches?kid=<kid>        how many key requests asked Plaid's endpoint for <kid>
 *
 * A path served with PUT /__serve answers 200 even under /status-<code>/, so a host can fail and then recover.
 */

declare module "vitest" {
  export interface ProvidedContext {
    keyStandinOrigin: string;
  }
}

const HANG_MS = 5_000;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const served = new Map<string, string>();
  const plaidKeys = new Map<string, { secret?: string; key?: unknown; answer?: "down" | "hang" }>();
  const plaidSecrets = new Set<string>();
  const fetches = new Map<string, number>();

  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    response.setHeader("connection", "close");
    const url = new URL(request.url ?? "/", "http://standin");
    const body = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    });
    const answer = (status: number, text = "", type = "text/plain") => {
      response.writeHead(status, { "content-type": type });
      response.end(text);
    };
    if (request.method === "PUT" && url.pathname.startsWith("/__serve/")) {
      served.set(url.pathname.slice("/__serve".length), body);
      return answer(204);
    }
    if (request.method === "PUT" && url.pathname.startsWith("/__plaid/")) {
      const published = JSON.parse(body) as { secret?: string; key?: unknown; answer?: "down" | "hang" };
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
      const asked = JSON.parse(body || "{}") as { secret?: string; key_id?: string };
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
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  server.unref();
  const address = server.address();
  project.provide("keyStandinOrigin", `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`);
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}
