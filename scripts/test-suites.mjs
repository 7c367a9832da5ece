// Runs npm scripts side by side, a few at a time, for `npm test`: vitest runs one test file at a time and leaves
// a core of two idle, and the suites that start their own `wrangler dev` (test:http, test:browser, test:cli,
// test:sim) spend most of their time waiting on it, so vitest beside them, one after another, shares a 2-core
// machine well. Vitest's two projects are two suites: `isolated` (a workerd per file, the longest) takes one lane
// from the start, and the other lane runs the rest, `shared` among them, so neither core waits for the other's
// queue to empty. Each picks its own free ports and keeps its own wrangler registry and state, so they cannot
// take each other's requests or queue messages. The first suite named prints its output as it goes, whole lines at a
// time, so a long run shows its progress; every other suite's output is printed whole when it ends (never
// interleaved with another's), with its wall time. The exit code is 1 if any suite failed, after every suite has run.
//
//   node scripts/test-suites.mjs test:vitest:isolated test:cli test:sim test:vitest:shared test:browser test:http
//   TEST_SUITES_AT_ONCE=1 node scripts/test-suites.mjs …   # one after another, as before
import { spawn } from "node:child_process";
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
/** Two at a time: every suite starts workerd, which is what a 2-core machine can hold without starving them. */
const DEFAULT_AT_ONCE = 2;

const suites = process.argv.slice(2);
if (suites.length === 0) {
  console.error("usage: node scripts/test-suites.mjs <npm script>…");
  process.exit(2);
}
const atOnce = Number(process.env.TEST_SUITES_AT_ONCE ?? DEFAULT_AT_ONCE);
if (!Number.isInteger(atOnce) || atOnce < 1) {
  console.error(`TEST_SUITES_AT_ONCE must be a whole number of at least 1, not ${process.env.TEST_SUITES_AT_ONCE}`);
  process.exit(2);
}

const npm = process.platform === "win32" ? "npm.cmd" : "npm";
/** @type {Set<import("node:child_process").ChildProcess>} */
const running = new Set();

/** @returns {Promise<{ suite: string, code: number | null, seconds: number }>} */
function runSuite(/** @type {string} */ suite, /** @type {boolean} */ live) {
  const startedAt = Date.now();
  console.log(`[${suite}] started`);
  // Own process group: an interrupt of this runner ends the suite and every wrangler it started.
  const child = spawn(npm, ["run", "--silent", suite], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  /** @type {Buffer[]} */
  const output = [];
  const lines = live ? liveLines(suite) : undefined;
  const keep = lines ?? ((/** @type {Buffer} */ chunk) => output.push(chunk));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  return new Promise((done) => {
    child.once("close", (code) => {
      running.delete(child);
      const seconds = Math.round((Date.now() - startedAt) / 1000);
      lines?.flush();
      process.stdout.write(`\n===== ${suite} (${seconds} s, exit ${code}) =====\n`);
      process.stdout.write(Buffer.concat(output));
      done({ suite, code, seconds });
    });
  });
}

/** Passes a suite's output through as it comes, a whole line at a time, each line marked with the suite's name. */
function liveLines(/** @type {string} */ suite) {
  let partial = "";
  const write = (/** @type {Buffer} */ chunk) => {
    const lines = (partial + chunk.toString("utf8")).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) process.stdout.write(`[${suite}] ${line}\n`);
  };
  // The last line, if the suite ended without a newline.
  write.flush = () => partial && write(Buffer.from("\n"));
  return write;
}

for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) {
  process.once(signal, () => {
    for (const child of running) if (child.pid) process.kill(-child.pid, "SIGTERM");
    process.exit(130);
  });
}

const queue = [...suites];
/** @type {{ suite: string, code: number | null, seconds: number }[]} */
const results = [];
await Promise.all(
  Array.from({ length: Math.min(atOnce, queue.length) }, async () => {
    for (let suite = queue.shift(); suite !== undefined; suite = queue.shift()) {
      results.push(await runSuite(suite, suite === suites[0]));
    }
  }),
);

console.log("\nsuites:");
for (const { suite, code, seconds } of results) console.log(`  ${code === 0 ? "ok  " : "FAIL"} ${suite}  ${seconds} s`);
process.exit(results.every(({ code }) => code === 0) ? 0 : 1);
