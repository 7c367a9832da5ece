import { cpSync, mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { Sender } from "./lib/sender.ts";
import { bareRuntime, FLOOR_WRITE_PATH, heldBackDeployment, receiverRuntime, snapshotReceiver } from "./lib/setup.ts";
import { FINISHED_STATUSES, ReceiptStore } from "./lib/store.ts";

/**
 * Two builds of the acknowledgement path side by side, and the floor they are held to: the receiver's `src/` as it is
 * in this tree and as it is in `--baseline` (a copy of another commit's `src/`, e.g. `git archive main src | tar -x -C
 * /tmp/base`), each with its relay held back as perf's (c), and bench/bare-worker's one RPC and one row, perf's (e).
 * Rounds alternate the two builds' order; every target gets the same fresh signed events at a fixed rate (open loop),
 * so each pays the same idle overhead per second and workerd CPU per event compares across builds even on a machine
 * other work shares. Round 0 warms every target and is not counted.
 *
 *   node bench/ack-side-by-side.ts --baseline /tmp/base/src --rounds 5 --rate 40 --seconds 10 --port-base 9720
 *
 * `--whole` compares the whole systems instead, perf's (b): nothing held back, and each build's CPU is counted until
 * every event of the round is processed (the floor is counted until acknowledged, as it has nothing after that).
 */

const { values: flags } = parseArgs({
  options: {
    baseline: { type: "string" },
    rounds: { type: "string", default: "5" },
    rate: { type: "string", default: "40" },
    seconds: { type: "string", default: "10" },
    "port-base": { type: "string", default: "9720" },
    "state-dir": { type: "string", default: ".bench" },
    whole: { type: "boolean", default: false },
  },
});
if (!flags.baseline) throw new Error("--baseline <a src/ directory to compare with> is required");
const rounds = Number(flags.rounds);
const rate = Number(flags.rate);
const seconds = Number(flags.seconds);
const portBase = Number(flags["port-base"]);

type Target = "baseline" | "this tree" | "floor (e)";

async function main(): Promise<void> {
  const stateDir = resolve(flags["state-dir"]!, `ack-side-by-side-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  const build = (label: string, src?: string) => {
    const dir = join(stateDir, label);
    mkdirSync(dir, { recursive: true });
    const deployment = snapshotReceiver(dir);
    if (src) {
      rmSync(join(dir, "receiver", "src"), { recursive: true });
      cpSync(resolve(src), join(dir, "receiver", "src"), { recursive: true });
    }
    return { deployment: flags.whole ? deployment : heldBackDeployment(deployment, dir), dir };
  };
  const baseline = build("baseline", flags.baseline);
  const current = build("current");
  const runtimes = {
    baseline: receiverRuntime(baseline.deployment, baseline.dir, "baseline", portBase, portBase + 10),
    "this tree": receiverRuntime(current.deployment, current.dir, "current", portBase + 2, portBase + 12),
    "floor (e)": bareRuntime(stateDir, portBase + 4, portBase + 14),
  };
  const secret = { baseline: baseline.deployment.demoSecret, "this tree": current.deployment.demoSecret };
  const cpuMs: Record<Target, number[]> = { baseline: [], "this tree": [], "floor (e)": [] };
  const ackMs: Record<Target, number[]> = { baseline: [], "this tree": [], "floor (e)": [] };
  try {
    for (const runtime of Object.values(runtimes)) await runtime.start();
    for (let round = 0; round <= rounds; round++) {
      const order: Target[] =
        round % 2 ? ["baseline", "this tree", "floor (e)"] : ["this tree", "baseline", "floor (e)"];
      const line: string[] = [];
      for (const target of order) {
        const runtime = runtimes[target];
        const sender = new Sender({
          origin: runtime.origin,
          path: target === "floor (e)" ? FLOOR_WRITE_PATH : "/webhooks/demo",
          secret: target === "floor (e)" ? secret["this tree"] : secret[target],
          maxSockets: 64,
        });
        const events = rate * seconds;
        const before = runtime.cpuSeconds().workerd;
        const startedAt = performance.now();
        const answers: Promise<unknown>[] = [];
        let refused = 0;
        for (let n = 0; n < events; n++) {
          const wait = startedAt + (n * 1000) / rate - performance.now();
          if (wait > 0) await sleep(wait);
          const body = JSON.stringify({
            type: "account.credited",
            data: { account: `side_acct_${String(n % 500).padStart(4, "0")}`, amount: 100 },
          });
          const key = `side_${target.replace(/\W/g, "")}_r${round}_${n}`;
          answers.push(
            sender.post(body, sender.signedHeaders(key, body)).then((outcome) => {
              if (outcome.status === "error" || outcome.status >= 300) refused++;
              else if (round > 0) ackMs[target].push(outcome.millis);
            }),
          );
        }
        await Promise.all(answers);
        sender.close();
        if (flags.whole && target !== "floor (e)")
          await drain(runtime.options.persistDir, `side_${target.replace(/\W/g, "")}_r${round}_`, events);
        const perEvent = ((runtime.cpuSeconds().workerd - before) * 1000) / events;
        if (round > 0) cpuMs[target].push(perEvent);
        line.push(`${target} ${perEvent.toFixed(2)}${refused > 0 ? ` (${refused} not 2xx)` : ""}`);
      }
      console.log(`round ${round}${round === 0 ? " (warm-up)" : ""}: workerd CPU ms per event: ${line.join(" · ")}`);
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    console.log(
      `median of ${rounds} rounds at ${rate} events/s: ${(Object.keys(cpuMs) as Target[])
        .map((target) => `${target} ${median(cpuMs[target]).toFixed(2)}`)
        .join(" · ")}`,
    );
    const quantile = (values: number[], q: number) =>
      [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * q))]!;
    console.log(
      `acknowledgement latency over the counted rounds, p50 / p99 ms: ${(Object.keys(ackMs) as Target[])
        .map(
          (target) =>
            `${target} ${quantile(ackMs[target], 0.5).toFixed(1)} / ${quantile(ackMs[target], 0.99).toFixed(1)}`,
        )
        .join(" · ")}`,
    );
    const differences = cpuMs["this tree"].map((ms, index) => ms - cpuMs.baseline[index]!);
    console.log(`this tree minus baseline, round by round: ${differences.map((ms) => ms.toFixed(2)).join(" ")}`);
  } finally {
    for (const runtime of Object.values(runtimes)) await runtime.stop();
  }
}

/** Waits until every event of the round (its keys start with `prefix`) has a finished receipt. */
async function drain(persistDir: string, prefix: string, count: number): Promise<void> {
  const store = new ReceiptStore(persistDir);
  const finished = () => {
    try {
      return [...store.statusCounts(prefix)].reduce(
        (sum, [status, n]) => sum + (FINISHED_STATUSES.includes(status) ? n : 0),
        0,
      );
    } catch {
      return 0; // the database may not be created yet, or mid-checkpoint
    }
  };
  const deadline = Date.now() + 300_000;
  while (finished() < count) {
    if (Date.now() > deadline) throw new Error(`${prefix}: only ${finished()} of ${count} processed`);
    await sleep(100);
  }
}

await main();
