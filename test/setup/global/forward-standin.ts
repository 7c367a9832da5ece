import { once } from "node:events";
import { Worker } from "node:worker_threads";
import type { TestProject } from "vitest/node";

/**
 * A stand-in for a user's backend that forward destinations (and handlers' external calls) point at, on
 * 127.0.0.1:8793 (or the next free port: startForwardStandin). Its behaviour is chosen by the path, so a test source's URL says what it will meet:
 *
 *   /ok                         204 to everything
 *   /status/<code>              always <code>
 *   /script/<step>,<step>,…     the n-th request carrying one Idempotency-Key gets step n (the last repeats);
 *                               a step is a status ("500", "200"), "429:<seconds>" (429 with Retry-After), or
 *                               "hang" (answers only after 3 s, long after the caller's timeout)
 *   /poison                     500 when the body contains "poison", 200 otherwise
 *   /when/<marker>/<steps>      a body containing <marker> follows the script <steps> (as /script/), any other 204
 *   /slow/<ms>                  204, answered only after <ms> (a destination that is slow but answers in time)
 *   /lane/<name>/gather/<n>     204, answered once <n> of the lane's requests are open at once, all together (or
 *                               each after 8 s): proves sends ran alongside each other by a count, not a timing
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
 *
 * The server itself (forward-standin-server.mjs) runs in a worker thread, so its answers never wait on this
 * process's event loop, which also serves the test files (two at a time, vitest.config.ts): a stall there once
 * outlasted the receiver's 10 s forward timeout. vitest.config.ts starts the thread (startForwardStandin, below)
 * before it points the fixtures at the port the thread bound; this global setup only hands that origin to the tests
 * and stops the thread at the end of the run.
 */

/** 8793 is the one the fixtures name; 8798 is kept free on purpose (the refused-connection source). */
export const STANDIN_PORTS = [8793, 8794, 8795, 8796, 8797];

declare module "vitest" {
  export interface ProvidedContext {
    forwardStandinOrigin: string;
  }
}

/** Where startForwardStandin leaves the running stand-in, for this process's global setup (and a config reloaded). */
const RUNNING_STANDIN = Symbol.for("edge-webhook-receiver.forward-standin");

interface RunningStandin {
  thread: Worker;
  port: number;
}

/**
 * Starts the stand-in's thread once per process and answers the port it listens on: the first free one of
 * STANDIN_PORTS (several runs may share this machine), else any port the OS picks. The thread binds the port itself,
 * so it is held from the moment it is chosen and no other run can take it before the fixtures are pointed at it.
 */
export async function startForwardStandin(): Promise<number> {
  const holder = globalThis as { [RUNNING_STANDIN]?: RunningStandin };
  const running = holder[RUNNING_STANDIN];
  if (running) return running.port;
  const thread = new Worker(new URL("./forward-standin-server.mjs", import.meta.url), {
    workerData: { ports: STANDIN_PORTS },
  });
  const [{ port }] = (await once(thread, "message")) as [{ port: number }];
  // Never the reason the process stays alive (a run that loads the config without running the setup).
  thread.unref();
  holder[RUNNING_STANDIN] = { thread, port };
  return port;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const port = await startForwardStandin();
  project.provide("forwardStandinOrigin", `http://127.0.0.1:${port}`);
  return async () => {
    const holder = globalThis as { [RUNNING_STANDIN]?: RunningStandin };
    const running = holder[RUNNING_STANDIN];
    if (!running) return;
    delete holder[RUNNING_STANDIN];
    running.thread.postMessage("close");
    await once(running.thread, "exit");
  };
}
