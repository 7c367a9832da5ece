import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { freePort } from "./lib/runtime.ts";
import { Sender } from "./lib/sender.ts";
import { bareRuntime, FLOOR_WRITE_PATH, heldBackDeployment, receiverRuntime, snapshotReceiver } from "./lib/setup.ts";
import { FINISHED_STATUSES, ReceiptStore } from "./lib/store.ts";

/**
 * Where the receiver's CPU goes, per event: starts one receiver on local workerd, attaches V8's sampling profiler
 * (Chrome DevTools Protocol over workerd's own inspector) to every isolate that does work for an event — the Worker
 * with its Durable Objects and queue consumer, and the local simulators of D1 and the queue — sends N fresh signed
 * events at a concurrency, waits until every one is processed, and prints each isolate's CPU and its heaviest
 * functions (self time) and our own functions (total time), in ms per event. It writes the .cpuprofile files too
 * (open them in Chrome DevTools). Locally only: the D1 and queue simulators are not what Cloudflare runs.
 *
 *   node bench/profile.ts --events 2000 --concurrency 16
 *   node bench/profile.ts --events 2000 --concurrency 16 --held-back   # the ack path alone, as perf's (c)
 *   node bench/profile.ts --events 2000 --concurrency 16 --floor       # the floor it is compared with, perf's (e)
 *
 * `--held-back` profiles the receiver with its relay held back (bench/lib/setup.ts, heldBackDeployment), so no relay or
 * consumer runs and what is sampled is the acknowledgement path alone; it waits for the acknowledgements, not for
 * processing. `--floor` profiles bench/bare-worker's one-RPC-one-row path the same way.
 */

const { values: flags } = parseArgs({
  options: {
    events: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "16" },
    top: { type: "string", default: "25" },
    "state-dir": { type: "string", default: ".bench" },
    "held-back": { type: "boolean", default: false },
    floor: { type: "boolean", default: false },
  },
});
const heldBack = flags["held-back"];
const floor = flags.floor;
/** Only the whole system relays and processes: the other targets are done once every delivery is acknowledged. */
const processes = !heldBack && !floor;
const events = Number(flags.events);
const concurrency = Number(flags.concurrency);
const top = Number(flags.top);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** One CDP session over the runtime's WebSocket. */
class Inspector {
  private nextId = 1;
  private readonly pending = new Map<number, (result: unknown) => void>();
  private readonly socket: WebSocket;
  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: unknown };
      if (message.id === undefined) return;
      this.pending.get(message.id)?.(message.error ? { error: message.error } : message.result);
      this.pending.delete(message.id);
    });
  }
  static async open(url: string): Promise<Inspector> {
    // wrangler's inspector proxy takes a local Origin only (undici's WebSocket takes headers as an extension).
    const socket = new WebSocket(url, { headers: { Origin: "http://127.0.0.1" } } as unknown as string[]);
    await new Promise((resolve, reject) => {
      socket.addEventListener("open", resolve, { once: true });
      socket.addEventListener("error", reject, { once: true });
    });
    return new Inspector(socket);
  }
  send<T>(method: string, params: Record<string, unknown> = {}, timeoutMs = 30_000): Promise<T> {
    const id = this.nextId++;
    this.socket.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${method}: no answer in ${timeoutMs} ms`)), timeoutMs);
      this.pending.set(id, (result) => {
        clearTimeout(timer);
        resolve(result as T);
      });
    });
  }
  close(): void {
    this.socket.close();
  }
}

/** workerd's own inspector (not wrangler's proxy, which shows the user Worker alone): lists every isolate. */
async function workerdTargets(pids: number[]): Promise<Array<{ id: string; webSocketDebuggerUrl: string }>> {
  const listening = execFileSync("ss", ["-ltnp"], { encoding: "utf8" });
  for (const pid of pids) {
    for (const match of listening.matchAll(new RegExp(`127\\.0\\.0\\.1:(\\d+) .*pid=${pid},`, "g"))) {
      try {
        const response = await fetch(`http://127.0.0.1:${match[1]}/json/list`, { signal: AbortSignal.timeout(2000) });
        const list = (await response.json()) as Array<{ id: string; webSocketDebuggerUrl: string }>;
        if (Array.isArray(list) && list.some((target) => target.id.startsWith("core:user:"))) return list;
      } catch {
        // not the inspector
      }
    }
  }
  throw new Error("workerd's inspector not found");
}

const PROFILED = (id: string) =>
  id === "core:user:edge-webhook-receiver" ||
  id === "core:user:bench-bare-worker" ||
  id === "d1:db" ||
  id === "queues:queue" ||
  id === "core:entry";

const SAMPLING_INTERVAL_US = 200;
const SAMPLE_CAP_US = 5 * SAMPLING_INTERVAL_US;

function summarise(label: string, profile: Profile, perEvent: number): string[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  // V8 samples an isolate only while it runs: a long gap before a sample is time the isolate was idle (or the
  // machine busy elsewhere), so each sample weighs the gap after it, capped at a few sampling intervals.
  const self = new Map<number, number>();
  profile.samples.forEach((sample, index) => {
    const ms = Math.min(profile.timeDeltas[index + 1] ?? 0, SAMPLE_CAP_US) / 1000;
    self.set(sample, (self.get(sample) ?? 0) + ms);
  });
  const name = (node: ProfileNode) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.split("/").slice(-2).join("/");
    return `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}`;
  };
  const selfByName = new Map<string, number>();
  const totalByName = new Map<string, number>();
  let busy = 0;
  // Total time per function name, counted once per sample even when it recurses.
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  for (const [id, ms] of self) {
    const node = byId.get(id)!;
    const key = name(node);
    selfByName.set(key, (selfByName.get(key) ?? 0) + ms);
    if (node.callFrame.functionName === "(idle)") continue;
    busy += ms;
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const frame = name(byId.get(at)!);
      if (seen.has(frame)) continue;
      seen.add(frame);
      totalByName.set(frame, (totalByName.get(frame) ?? 0) + ms);
    }
  }
  const lines = [`\n== ${label}: busy ${(busy / perEvent).toFixed(3)} ms per event (sampled, gaps capped at 1 ms)`];
  lines.push("  self ms/event   function");
  for (const [key, ms] of [...selfByName]
    .filter(([key]) => !key.startsWith("(idle)"))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`  ${(ms / perEvent).toFixed(3).padStart(13)}   ${key}`);
  lines.push("  total ms/event  function (our source and the libraries it calls)");
  for (const [key, ms] of [...totalByName].sort((a, b) => b[1] - a[1]).slice(0, top * 2))
    lines.push(`  ${(ms / perEvent).toFixed(3).padStart(13)}   ${key}`);
  lines.push(...longestStretches(profile, byId, parentOf, name));
  return lines;
}

/**
 * The longest stretches the isolate ran without going idle: each holds the one thread every request of the isolate
 * waits on, so they are what a tail latency can be made of. Each with the functions of ours most of it ran under.
 */
function longestStretches(
  profile: Profile,
  byId: Map<number, ProfileNode>,
  parentOf: Map<number, number>,
  name: (node: ProfileNode) => string,
): string[] {
  const stretches: Array<{ ms: number; under: Map<string, number> }> = [];
  let current: { ms: number; under: Map<string, number> } | null = null;
  profile.samples.forEach((sample, index) => {
    const delta = (profile.timeDeltas[index + 1] ?? 0) / 1000;
    const node = byId.get(sample)!;
    if (node.callFrame.functionName === "(idle)" || delta > SAMPLE_CAP_US / 1000) {
      if (current) stretches.push(current);
      current = null;
      return;
    }
    current ??= { ms: 0, under: new Map() };
    current.ms += delta;
    const seen = new Set<string>();
    for (let at: number | undefined = sample; at !== undefined; at = parentOf.get(at)) {
      const frame = byId.get(at)!;
      if (!frame.callFrame.url || seen.has(name(frame))) continue;
      seen.add(name(frame));
      current.under.set(name(frame), (current.under.get(name(frame)) ?? 0) + delta);
    }
  });
  if (current) stretches.push(current);
  const longest = stretches.sort((a, b) => b.ms - a.ms).slice(0, 10);
  const lines = ["  longest busy stretches (ms, and the functions of the bundle most of it ran under)"];
  for (const { ms, under } of longest) {
    const heaviest = [...under]
      .filter(([frame]) => !frame.startsWith("(anonymous)") && !frame.startsWith("__facade"))
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([frame, spent]) => `${frame} ${spent.toFixed(1)}`);
    lines.push(`  ${ms.toFixed(1).padStart(13)}   ${heaviest.join(" · ")}`);
  }
  return lines;
}

async function main(): Promise<void> {
  const stateDir = resolve(flags["state-dir"], `profile-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  mkdirSync(stateDir, { recursive: true });
  const deployment = snapshotReceiver(stateDir);
  const runtime = floor
    ? bareRuntime(stateDir, await freePort(), await freePort())
    : receiverRuntime(
        heldBack ? heldBackDeployment(deployment, stateDir) : deployment,
        stateDir,
        "profiled",
        await freePort(),
        await freePort(),
      );
  await runtime.start();
  try {
    const targets = (await workerdTargets(runtime.workerdPids())).filter((target) => PROFILED(target.id));
    const sessions: Array<{ id: string; inspector: Inspector }> = [];
    for (const target of targets) {
      // The Worker's own isolate answers only wrangler's inspector proxy, which holds workerd's session for it.
      const url = target.id.startsWith("core:user:")
        ? `ws://127.0.0.1:${runtime.options.inspectorPort}/ws`
        : target.webSocketDebuggerUrl;
      const inspector = await Inspector.open(url);
      try {
        await inspector.send("Profiler.enable", {}, 5000);
        sessions.push({ id: target.id, inspector });
      } catch (error) {
        console.error(`${target.id}: ${String(error)}`);
        inspector.close();
      }
    }
    const sender = new Sender({
      origin: runtime.origin,
      path: floor ? FLOOR_WRITE_PATH : "/webhooks/demo",
      secret: deployment.demoSecret,
      maxSockets: concurrency,
    });
    // Warm every path once (first relay, first consumer batch, first D1 statements) before sampling.
    const send = async (prefix: string, count: number) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let n = next++; n < count; n = next++) {
            const body = JSON.stringify({
              type: "account.credited",
              data: { account: `prof_acct_${String(n % 500).padStart(4, "0")}`, amount: 100 },
            });
            for (;;) {
              const outcome = await sender.post(body, sender.signedHeaders(`${prefix}${n}`, body));
              if (outcome.status !== "error" && outcome.status < 300) break;
            }
          }
        }),
      );
    };
    const store = processes ? new ReceiptStore(runtime.options.persistDir) : null;
    const finished = (prefix: string) =>
      [...store!.statusCounts(prefix)].reduce(
        (sum, [status, count]) => sum + (FINISHED_STATUSES.includes(status) ? count : 0),
        0,
      );
    const drain = async (prefix: string, count: number) => {
      if (!processes) return;
      const deadline = Date.now() + 300_000;
      while (finished(prefix) < count) {
        if (Date.now() > deadline) throw new Error(`${prefix}: only ${finished(prefix)} of ${count} processed`);
        await sleep(200);
      }
    };
    console.error(`profiling ${sessions.map((session) => session.id).join(", ")}; warming up`);
    await send("prof_warm_", 300);
    await drain("prof_warm_", 300);
    console.error("warm");
    for (const { inspector } of sessions) {
      await inspector.send("Profiler.setSamplingInterval", { interval: SAMPLING_INTERVAL_US });
      await inspector.send("Profiler.start");
    }
    console.error("profiler started; sending");
    const cpuBefore = runtime.cpuSeconds();
    const startedAt = performance.now();
    await send("prof_evt_", events);
    const ackedAt = performance.now();
    console.error("acknowledged; draining");
    await drain("prof_evt_", events);
    const processedAt = performance.now();
    const cpuAfter = runtime.cpuSeconds();
    const lines = [
      `${events} events at concurrency ${concurrency}: acked in ${((ackedAt - startedAt) / 1000).toFixed(1)} s, ${processes ? `all processed after ${((processedAt - startedAt) / 1000).toFixed(1)} s` : "nothing processed (relay held back or the floor)"}`,
      `workerd CPU ${(((cpuAfter.workerd - cpuBefore.workerd) * 1000) / events).toFixed(2)} ms per event, wrangler ${(((cpuAfter.wrangler - cpuBefore.wrangler) * 1000) / events).toFixed(2)} (profiler on)`,
    ];
    for (const { id, inspector } of sessions) {
      const { profile } = await inspector.send<{ profile: Profile }>("Profiler.stop");
      writeFileSync(join(stateDir, `${id.replace(/[^a-z0-9]+/gi, "_")}.cpuprofile`), JSON.stringify(profile));
      lines.push(...summarise(id, profile, events));
      inspector.close();
    }
    sender.close();
    console.log(lines.join("\n"));
    console.log(`\nprofiles in ${stateDir}`);
  } finally {
    await runtime.stop();
  }
}

await main();
