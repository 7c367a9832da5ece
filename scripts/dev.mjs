#!/usr/bin/env node
// `npm start`: create .dev.vars from the committed example on first run, apply local D1 migrations, run wrangler
// dev, and fire the scheduled handler on the configured cron schedule (wrangler dev never does that by itself).
//   --cron-every 30s   fire it every 30 seconds instead, for impatient people
//   --no-cron          never fire it
//   --port 8797        listen there instead of 8787 (or PORT=8797)
// Whatever the flags, it also asks the Worker to refill its queue after each start or reload (requeueAfterStarts).
// Every other argument goes to wrangler dev.
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { parseCron, parseEvery } from "./lib/cron.mjs";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  console.error(`Node ${process.versions.node} is too old: wrangler needs Node >= 22.12.`);
  process.exit(1);
}
const env = { ...process.env, WRANGLER_SEND_METRICS: "false" };
/** Must equal RESTART_REQUEUE_CRON in src/reconcile/restart-requeue.ts. */
const RESTART_REQUEUE_CRON = "local-restart-requeue";
/** How often the Worker is asked: work waiting when it starts is sent again within this long of its answering. */
const RESTART_REQUEUE_ASK_MS = 10_000;

/**
 * Takes `--name value` or `--name=value` out of args; answers the value.
 * @param {string[]} args
 * @param {string} name
 * @returns {string | undefined}
 */
function takeOption(args, name) {
  const at = args.findIndex((arg) => arg === name || arg.startsWith(`${name}=`));
  if (at < 0) return undefined;
  if (args[at].includes("=")) return args.splice(at, 1)[0].slice(name.length + 1);
  return args.splice(at, 2)[1];
}
/**
 * Takes a bare `--name` out of args; answers whether it was there.
 * @param {string[]} args
 * @param {string} name
 */
function takeFlag(args, name) {
  const at = args.indexOf(name);
  if (at >= 0) args.splice(at, 1);
  return at >= 0;
}
/**
 * Reads `--name value` or `--name=value` without removing it (wrangler dev needs it too).
 * @param {string[]} args
 * @param {...string} names
 */
function peekOption(args, ...names) {
  for (const name of names) {
    const at = args.findIndex((arg) => arg === name || arg.startsWith(`${name}=`));
    if (at >= 0) return args[at].includes("=") ? args[at].slice(name.length + 1) : args[at + 1];
  }
  return undefined;
}

const devArgs = process.argv.slice(2);
const cronEveryText = takeOption(devArgs, "--cron-every");
const noCron = takeFlag(devArgs, "--no-cron");
const cronEveryMs = cronEveryText === undefined ? null : parseEvery(cronEveryText);
if (cronEveryText !== undefined && cronEveryMs === null) {
  console.error(`--cron-every ${cronEveryText}: use a duration like 30s, 2m or 1h`);
  process.exit(1);
}
// wrangler dev takes one --port: ours is taken out of the arguments and passed once.
const port = takeOption(devArgs, "--port") ?? process.env.PORT ?? "8787";
const host = peekOption(devArgs, "--ip") ?? "127.0.0.1";

/** Whether something already listens on the port (another npm start, most often). */
function portTaken(/** @type {number} */ candidate) {
  return new Promise((done) => {
    const probe = createServer();
    probe.once("error", () => done(true));
    probe.listen(candidate, host.replace("0.0.0.0", "127.0.0.1"), () => probe.close(() => done(false)));
  });
}
if (await portTaken(Number(port))) {
  let suggestion = Number(port) + 10;
  while ((await portTaken(suggestion)) && suggestion < Number(port) + 100) suggestion += 1;
  console.error(`port ${port} is in use (another npm start?): stop it, or run npm start -- --port ${suggestion}`);
  process.exit(1);
}
// A chosen --env-file holds the secrets; otherwise the first run makes .dev.vars from the committed example.
if (!peekOption(devArgs, "--env-file") && !existsSync(".dev.vars")) {
  copyFileSync(".dev.vars.example", ".dev.vars");
  console.log("Created .dev.vars from .dev.vars.example (local secrets for the demo source).");
}

/** `[name, value]` when the value was given, else nothing. */
function optionArgs(/** @type {string} */ name, /** @type {string | undefined} */ value) {
  return value ? [name, value] : [];
}

// The migrations must land in the same local state directory wrangler dev will read.
const persistTo = peekOption(devArgs, "--persist-to");
const configArgs = ["--config", "-c"].flatMap((name) => optionArgs(name, peekOption(devArgs, name))).slice(0, 2);
const envArgs = ["--env", "-e"].flatMap((name) => optionArgs("--env", peekOption(devArgs, name))).slice(0, 2);
// Every D1 database the config binds, not only DB: a source may keep its receipts in another (scripts/migrate.mjs).
const migrated = spawnSync(
  process.execPath,
  [
    "scripts/migrate.mjs",
    "--local",
    "--quiet",
    ...configArgs,
    ...envArgs,
    ...(persistTo ? ["--persist-to", persistTo] : []),
  ],
  { stdio: "inherit", env },
);
if (migrated.status !== 0) process.exit(migrated.status ?? 1);

const wrangler = spawn("npx", ["wrangler", "dev", "--port", port, ...devArgs], { stdio: "inherit", env });
wrangler.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) process.on(signal, () => wrangler.kill(signal));

const base = `http://${host}:${port}`.replace("0.0.0.0", "127.0.0.1");
requeueAfterStarts();
if (!noCron) await startLocalCron();

/**
 * wrangler dev keeps its queue in memory, so a start or a reload (saving wrangler.toml or a file under src/)
 * begins with none of the messages pending work had. Every few seconds this asks the Worker, through the scheduled
 * hook with a cron string of its own, to put its unfinished receipts back on the queue with what is left of their
 * delays (src/reconcile/restart-requeue.ts): the Worker does it on the first ask after each boot, and the asks in
 * between cost it nothing. Refused unless .dev.vars says LOCAL_DEVELOPMENT="true".
 */
function requeueAfterStarts() {
  const ask = () =>
    fetch(`${base}/cdn-cgi/local/scheduled?cron=${RESTART_REQUEUE_CRON}`, { signal: AbortSignal.timeout(30_000) }).then(
      () => undefined,
      () => undefined, // not listening yet, or reloading: the next ask comes soon
    );
  setInterval(ask, RESTART_REQUEUE_ASK_MS);
}

/**
 * Fires /cdn-cgi/local/scheduled, the hook wrangler dev exposes for the scheduled handler, at each minute the
 * config's crons match (or every --cron-every), so alerts, re-drive and retention run locally as deployed.
 */
async function startLocalCron() {
  const { unstable_readConfig } = await import("wrangler");
  const config = unstable_readConfig({
    config: peekOption(devArgs, "--config", "-c"),
    env: peekOption(devArgs, "--env", "-e"),
  });
  /** @type {string[]} */
  const crons = config.triggers?.crons ?? [];
  const fire = async (/** @type {string} */ cron, /** @type {number} */ at) => {
    try {
      const response = await fetch(`${base}/cdn-cgi/local/scheduled?cron=${encodeURIComponent(cron)}&time=${at}`, {
        signal: AbortSignal.timeout(60_000),
      });
      console.log(`[local cron] ${new Date(at).toISOString()} scheduled handler (${cron}) → ${response.status}`);
    } catch {
      // wrangler dev is still starting, or restarting after an edit: the next tick tries again.
    }
  };
  if (cronEveryMs !== null) {
    console.log(`[local cron] firing the scheduled handler every ${cronEveryText}`);
    setInterval(() => fire(crons[0] ?? "* * * * *", Date.now()), cronEveryMs);
    return;
  }
  const schedules = crons.flatMap((cron) => {
    try {
      return [{ cron, matches: parseCron(cron) }];
    } catch (error) {
      console.error(
        `[local cron] ${cron} is not understood locally (${error instanceof Error ? error.message : String(error)}); it will only run when deployed`,
      );
      return [];
    }
  });
  if (schedules.length === 0) return;
  console.log(
    `[local cron] firing the scheduled handler on ${schedules.map((schedule) => schedule.cron).join(", ")} (UTC); --cron-every 30s to go faster`,
  );
  // Check each minute boundary, as Cloudflare does; the scheduled time is that minute.
  const tick = () => {
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    for (const schedule of schedules) if (schedule.matches(new Date(minute))) void fire(schedule.cron, minute);
    setTimeout(tick, minute + 60_000 - Date.now() + 50);
  };
  setTimeout(tick, Math.ceil(Date.now() / 60_000) * 60_000 - Date.now() + 50);
}
