import { once } from "node:events";
import { Worker } from "node:worker_threads";
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
 *
 * The server itself (key-standin-server.mjs) runs in a worker thread, so its answers never wait on this process's
 * event loop, which also serves the test files' modules (a stall there once outlasted the receiver's fetch timeout).
 */

declare module "vitest" {
  export interface ProvidedContext {
    keyStandinOrigin: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = new Worker(new URL("./key-standin-server.mjs", import.meta.url));
  const [{ port }] = (await once(server, "message")) as [{ port: number }];
  // Never the reason the process stays alive.
  server.unref();
  project.provide("keyStandinOrigin", `http://127.0.0.1:${port}`);
  return async () => {
    server.postMessage("close");
    await once(server, "exit");
  };
}
