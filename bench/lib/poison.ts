import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { POISON_HANDLER, POISON_SOURCE } from "../poison/names.ts";
import type { Runtime } from "./runtime.ts";
import { Sender } from "./sender.ts";
import { deploymentWithSource, type ReceiverDeployment, receiverRuntime, repoRoot } from "./setup.ts";
import { ReceiptStore } from "./store.ts";

/**
 * A poison event under real crashes. One event whose attempt never returns (bench/poison/worker.ts) is sent with
 * batch-mates, all in one relay batch; the runtime is SIGKILLed while the attempt hangs, restarted, and the cron
 * (fired as if 11 minutes later, past the lease and the re-drive's grace) brings the work back: the local queue
 * loses its messages with the runtime, so only the re-drive and the lease return do. Repeated until the poison is
 * dead. It must end dead alone, its crashes counted, and every batch-mate applied exactly once.
 */

const KEY_PREFIX = "poison_";
const POISON_KEY = `${KEY_PREFIX}marked`;
/** Retries after the first attempt: crashes the poison is allowed before it is dead (see `expectedKills`). */
const MAX_RETRIES = 1;
/** Kills at most, however the run goes: the check fails rather than loop. */
const KILL_LIMIT = 8;
const CRON_LEAD_MS = 11 * 60_000;

export interface PoisonResult {
  kills: number;
  poison: {
    status: string;
    attempts: number;
    lastError: string | null;
    history: Array<{ number: number; outcome: string }>;
  };
  mates: { sent: number; processed: number; appliedOnce: number; appliedTwice: number };
  cronRuns: number;
  failures: string[];
}

/** The receiver with the poison handler's entry point as `main` and a source of its own, one claim shard (one relay batch). */
export function poisonDeployment(deployment: ReceiverDeployment, stateDir: string): ReceiverDeployment {
  const snapshot = dirname(deployment.configPath);
  cpSync(join(repoRoot, "bench", "poison"), join(snapshot, "bench", "poison"), { recursive: true });
  const withSource = deploymentWithSource(deployment, "poison", POISON_SOURCE, {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: `handler:${POISON_HANDLER}`,
    retry: { max_retries: MAX_RETRIES },
  });
  const config = readFileSync(withSource.configPath, "utf8").replace(/^main = .*$/m, 'main = "bench/poison/worker.ts"');
  writeFileSync(withSource.configPath, config);
  const envFile = join(stateDir, "bench-poison.env");
  writeFileSync(envFile, `${readFileSync(deployment.envFile, "utf8")}CLAIM_SHARD_COUNT=1\n`, { mode: 0o600 });
  return { ...withSource, envFile };
}

/** `started` is told of the runtime, so a bench that is interrupted stops it too. */
export async function poisonCheck(
  deployment: ReceiverDeployment,
  stateDir: string,
  ports: { port: number; inspectorPort: number },
  started: (runtime: Runtime) => void,
  mates = 9,
): Promise<PoisonResult> {
  const runtime = receiverRuntime(
    poisonDeployment(deployment, stateDir),
    stateDir,
    "poison",
    ports.port,
    ports.inspectorPort,
  );
  started(runtime);
  await runtime.start();
  try {
    return await playPoison(runtime, deployment, mates);
  } finally {
    await runtime.stop();
  }
}

async function playPoison(runtime: Runtime, deployment: ReceiverDeployment, mateCount: number): Promise<PoisonResult> {
  const store = new ReceiptStore(runtime.options.persistDir);
  const sender = new Sender({
    origin: runtime.origin,
    path: `/webhooks/${POISON_SOURCE}`,
    secret: deployment.demoSecret,
    maxSockets: mateCount + 1,
  });
  const events = [
    ...Array.from({ length: mateCount }, (_, index) => ({
      key: `${KEY_PREFIX}mate_${index}`,
      data: { account: `${KEY_PREFIX}acct_${index}`, amount: 1 },
    })),
    { key: POISON_KEY, data: { account: `${KEY_PREFIX}acct_marked`, amount: 1, hang: true } },
  ];
  // All at once, so they share one relay batch (one shard, a 3 s relay delay) and so one consumer slice.
  await Promise.all(
    events.map(async ({ key, data }) => {
      const body = JSON.stringify({ type: "account.credited", data });
      for (let tries = 0; tries < 20; tries++) {
        const outcome = await sender.deliver(key, body);
        if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) return;
        await sleep(250);
      }
      throw new Error(`poison phase: ${key} was never acknowledged`);
    }),
  );
  sender.close();
  await until(() => receiptCount(store) === events.length, 30_000, "the events never reached D1");
  // Give the consumer its batch; the poison's attempt hangs and holds its slice's commit, batch-mates included.
  await sleep(4000);

  let kills = 0;
  let cronRuns = 0;
  let generation = poisonRow(store).generation;
  while (poisonRow(store).status !== "dead" && kills < KILL_LIMIT) {
    await runtime.kill();
    kills++;
    await runtime.start();
    // The cron, until the poison is running again (a newer lease) or dead.
    const moved = await until(
      async () => {
        cronRuns++;
        await fireCron(runtime);
        const deadline = Date.now() + 8000;
        while (Date.now() < deadline) {
          const row = poisonRow(store);
          if (row.status === "dead" || (row.status === "processing" && row.generation > generation)) return true;
          await sleep(200);
        }
        return false;
      },
      120_000,
      null,
    );
    if (!moved) break;
    generation = poisonRow(store).generation;
  }
  // The batch-mates the poison held back finish through the cron's re-drive.
  await until(
    async () => {
      if (mateStatuses(store).processed === mateCount) return true;
      cronRuns++;
      await fireCron(runtime);
      await sleep(2000);
      return mateStatuses(store).processed === mateCount;
    },
    90_000,
    null,
  );
  return verdict(store, kills, cronRuns, mateCount);
}

function verdict(store: ReceiptStore, kills: number, cronRuns: number, mateCount: number): PoisonResult {
  const row = poisonRow(store);
  const history = store.read(
    (database) =>
      database
        .prepare("SELECT attempt_number AS number, outcome FROM attempts WHERE receipt_id = ? ORDER BY attempt_number")
        .all(row.id) as Array<{ number: number; outcome: string }>,
  );
  const credits = store.read(
    (database) =>
      database.prepare("SELECT id, credits FROM accounts WHERE id LIKE ?").all(`${KEY_PREFIX}acct_%`) as Array<{
        id: string;
        credits: number;
      }>,
  );
  const mateCredits = credits.filter((account) => account.id !== `${KEY_PREFIX}acct_marked`);
  const mates = {
    sent: mateCount,
    processed: mateStatuses(store).processed,
    appliedOnce: mateCredits.filter((account) => account.credits === 1).length,
    appliedTwice: mateCredits.filter((account) => account.credits > 1).length,
  };
  const failures: string[] = [];
  // The poison's first run is lease-free (a first delivery of a D1-only handler writes nothing before it runs), so
  // its first crash is not counted; every later run is leased (a re-driven message runs one receipt at a time) and
  // counted: dead after MAX_RETRIES + 1 counted crashes, each one `unknown` attempt under its own number.
  const expectedAttempts = MAX_RETRIES + 1;
  if (row.status !== "dead")
    failures.push(`poison: the poison receipt is ${row.status} after ${kills} kills, not dead`);
  if (row.attempts !== expectedAttempts)
    failures.push(`poison: ${row.attempts} attempts counted, expected ${expectedAttempts}`);
  if (kills !== expectedAttempts + 1)
    failures.push(
      `poison: ${kills} kills before it was dead, expected ${expectedAttempts + 1} (the first, lease-free, uncounted)`,
    );
  const expectedHistory = Array.from({ length: expectedAttempts }, (_, index) => `${index + 1}:unknown`).join(" ");
  if (history.map(({ number, outcome }) => `${number}:${outcome}`).join(" ") !== expectedHistory) {
    failures.push(`poison: attempt history ${JSON.stringify(history)}, expected ${expectedHistory}`);
  }
  if (!/^gave up after \d+ attempts: lease expired before the attempt finished/.test(row.lastError ?? ""))
    failures.push(`poison: last error ${JSON.stringify(row.lastError)}`);
  if (credits.some((account) => account.id === `${KEY_PREFIX}acct_marked`))
    failures.push("poison: the poison event's effect was applied");
  if (mates.processed !== mateCount || mates.appliedOnce !== mateCount) {
    failures.push(
      `poison: of ${mateCount} batch-mates ${mates.processed} processed, ${mates.appliedOnce} applied once, ${mates.appliedTwice} applied more than once`,
    );
  }
  return {
    kills,
    poison: { status: row.status, attempts: row.attempts, lastError: row.lastError, history },
    mates,
    cronRuns,
    failures,
  };
}

async function fireCron(runtime: Runtime): Promise<void> {
  try {
    const response = await fetch(
      `${runtime.origin}/cdn-cgi/local/scheduled?cron=*/5+*+*+*+*&time=${Date.now() + CRON_LEAD_MS}`,
      { signal: AbortSignal.timeout(60_000) },
    );
    await response.arrayBuffer();
  } catch {
    // the runtime may still be starting: the caller fires again
  }
}

/** Polls `check` until it holds or `withinMs` passes; throws `failure` when given, else answers false. */
async function until(
  check: () => boolean | Promise<boolean>,
  withinMs: number,
  failure: string | null,
): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    try {
      if (await check()) return true;
    } catch {
      // the database may be mid-checkpoint; try again
    }
    await sleep(250);
  }
  if (failure !== null) throw new Error(`poison phase: ${failure}`);
  return false;
}

function receiptCount(store: ReceiptStore): number {
  return [...store.statusCounts(KEY_PREFIX).values()].reduce((sum, count) => sum + count, 0);
}

function poisonRow(store: ReceiptStore): {
  id: string;
  status: string;
  attempts: number;
  generation: number;
  lastError: string | null;
} {
  return store.read(
    (database) =>
      database
        .prepare(
          "SELECT id, status, attempts, lease_generation AS generation, last_error AS lastError FROM receipts WHERE event_key = ?",
        )
        .get(POISON_KEY) as {
        id: string;
        status: string;
        attempts: number;
        generation: number;
        lastError: string | null;
      },
  );
}

function mateStatuses(store: ReceiptStore): { processed: number } {
  const processed = store.read(
    (database) =>
      (
        database
          .prepare(
            "SELECT COUNT(*) AS n FROM receipts WHERE event_key LIKE ? AND event_key <> ? AND status = 'processed'",
          )
          .get(`${KEY_PREFIX}mate_%`, POISON_KEY) as { n: number }
      ).n,
  );
  return { processed };
}
