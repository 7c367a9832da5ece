import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import type { ReceiverDeployment } from "./setup.ts";
import type { Sender } from "./sender.ts";
import type { ReceiptStore } from "./store.ts";

/**
 * The soak phase: a fixed arrival rate for a while, with retention scaled down so that housekeeping has to keep
 * pace within the run, and the cron fired on a schedule the way Cloudflare would. Sizes are read from the
 * runtime's own SQLite files (D1 and every claim shard), read-only.
 */

export const SOAK_SOURCE = "soak";
const ACCOUNT_PREFIX = "soak_acct_";

export interface SoakSettings {
  rate: number;
  minutes: number;
  payloadRetention: string;
  dedupeRetention: string;
  cronSeconds: number;
}

export interface SoakSample {
  atSeconds: number;
  d1Bytes: number;
  shardBytes: number;
  receipts: number;
  receiptsWithBody: number;
  shardKeys: number;
  /** Accepted but not finished: claims still in a shard plus pending or processing receipts. */
  backlog: number;
  oldestPendingSeconds: number;
  /** Rows housekeeping removed since the previous sample (cron runs' counts). */
  receiptsDeleted: number;
  bodiesDropped: number;
  shardKeysDeleted: number;
  cronRuns: number;
}

/**
 * The deployment with a soak source of its own, in a copy of the snapshot's wrangler.toml: the demo's provider
 * and handler (every event credits 1 to an account, so the accounts table counts processed events after
 * retention has deleted their receipts) and the scaled-down retention.
 */
export function soakDeployment(deployment: ReceiverDeployment, settings: SoakSettings): ReceiverDeployment {
  const original = readFileSync(deployment.configPath, "utf8");
  const table = [
    `[vars.SOURCES.${SOAK_SOURCE}]`,
    `provider = "standard-webhooks"`,
    `secrets = ["DEMO_WEBHOOK_SECRET"]`,
    `destination = "handler:accounts"`,
    `type_path = "type"`,
    `subject_path = "data.account"`,
    `payload_retention = "${settings.payloadRetention}"`,
    `dedupe_retention = "${settings.dedupeRetention}"`,
    "",
    "",
  ].join("\n");
  // Top-level vars end where the first environment starts; the table goes just before it.
  const at = original.search(/^\[env\./m);
  const config = at < 0 ? `${original}\n${table}` : `${original.slice(0, at)}${table}${original.slice(at)}`;
  const configPath = deployment.configPath.replace(/wrangler\.toml$/, "wrangler-soak.toml");
  writeFileSync(configPath, config);
  return { ...deployment, configPath };
}

/** Deliveries at a fixed rate, each resent until acknowledged (an at-least-once sender). Returns the events acknowledged. */
export async function sendAtRate(
  sender: Sender,
  settings: SoakSettings,
  options: { accounts: number; maxInFlight: number },
): Promise<{ acknowledged: number; sent: number; resends: number; lateStarts: number }> {
  const startedAt = performance.now();
  const durationMs = settings.minutes * 60_000;
  const total = Math.floor((durationMs / 1000) * settings.rate);
  let acknowledged = 0;
  let resends = 0;
  let lateStarts = 0;
  let inFlight = 0;
  const pending: Promise<void>[] = [];
  const deliverOne = async (n: number): Promise<void> => {
    const body = JSON.stringify({ type: "account.credited", data: { account: `${ACCOUNT_PREFIX}${n % options.accounts}`, amount: 1, note: "x".repeat(600) } });
    for (let attempt = 0; ; attempt++) {
      const outcome = await sender.deliver(`soak_evt_${n}`, body);
      if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) break;
      resends++;
      await sleep(Math.min(10_000, 500 * 2 ** attempt));
    }
    acknowledged++;
  };
  for (let n = 0; n < total; n++) {
    const dueAt = startedAt + (n * 1000) / settings.rate;
    const wait = dueAt - performance.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -1000) lateStarts++;
    while (inFlight >= options.maxInFlight) await sleep(5);
    inFlight++;
    pending.push(deliverOne(n).finally(() => inFlight--));
  }
  await Promise.all(pending);
  return { acknowledged, sent: total, resends, lateStarts };
}

/** Fires the cron every `cronSeconds` until stopped, each run with the current time as its scheduled time. */
export function cronSchedule(origin: () => string, cronSeconds: number): { stop: () => Promise<number> } {
  let stopped = false;
  let runs = 0;
  const loop = (async () => {
    while (!stopped) {
      const next = performance.now() + cronSeconds * 1000;
      try {
        const response = await fetch(`${origin()}/cdn-cgi/local/scheduled?cron=*/5+*+*+*+*&time=${Date.now()}`, { signal: AbortSignal.timeout(120_000) });
        await response.arrayBuffer();
        runs++;
      } catch {
        // A run that fails is the receiver's to record (reconcile_runs); the schedule goes on.
      }
      while (!stopped && performance.now() < next) await sleep(Math.min(1000, next - performance.now()));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return runs;
    },
  };
}

interface Totals {
  receiptsDeleted: number;
  bodiesDropped: number;
  shardKeysDeleted: number;
  cronRuns: number;
}

/** Reads every size and count of one sample; `previous` turns the cron's cumulative counts into per-sample ones. */
export function takeSample(store: ReceiptStore, persistDir: string, atSeconds: number, previous: Totals): { sample: SoakSample; totals: Totals } {
  const now = Date.now();
  const d1 = store.read((database) => {
    const counts = database
      .prepare(
        `SELECT COUNT(*) AS receipts, SUM(body IS NOT NULL) AS withBody,
           SUM(status IN ('pending', 'processing')) AS unfinished,
           MIN(CASE WHEN status IN ('pending', 'processing') THEN received_at END) AS oldestUnfinished
         FROM receipts WHERE source = ?`,
      )
      .get(SOAK_SOURCE) as { receipts: number; withBody: number | null; unfinished: number | null; oldestUnfinished: number | null };
    const runs = database.prepare("SELECT counts FROM reconcile_runs WHERE counts IS NOT NULL").all() as { counts: string }[];
    const totals: Totals = { receiptsDeleted: 0, bodiesDropped: 0, shardKeysDeleted: 0, cronRuns: runs.length };
    for (const run of runs) {
      const counts = JSON.parse(run.counts) as { retention?: { keysExpired?: number; bodiesDropped?: number }; shards?: { shardKeysExpired?: number } };
      totals.receiptsDeleted += counts.retention?.keysExpired ?? 0;
      totals.bodiesDropped += counts.retention?.bodiesDropped ?? 0;
      totals.shardKeysDeleted += counts.shards?.shardKeysExpired ?? 0;
    }
    return { counts, totals, bytes: usedBytes(database) };
  });
  const shards = shardFiles(persistDir).map((file) => readShard(file));
  const oldest = Math.min(d1.counts.oldestUnfinished ?? Infinity, ...shards.map((shard) => shard.oldestUnrelayed ?? Infinity));
  const sample: SoakSample = {
    atSeconds,
    d1Bytes: d1.bytes,
    shardBytes: shards.reduce((sum, shard) => sum + shard.bytes, 0),
    receipts: d1.counts.receipts,
    receiptsWithBody: d1.counts.withBody ?? 0,
    shardKeys: shards.reduce((sum, shard) => sum + shard.keys, 0),
    backlog: (d1.counts.unfinished ?? 0) + shards.reduce((sum, shard) => sum + shard.unrelayed, 0),
    oldestPendingSeconds: Number.isFinite(oldest) ? Math.max(0, Math.round((now - oldest) / 1000)) : 0,
    receiptsDeleted: d1.totals.receiptsDeleted - previous.receiptsDeleted,
    bodiesDropped: d1.totals.bodiesDropped - previous.bodiesDropped,
    shardKeysDeleted: d1.totals.shardKeysDeleted - previous.shardKeysDeleted,
    cronRuns: d1.totals.cronRuns - previous.cronRuns,
  };
  return { sample, totals: d1.totals };
}

export const NO_TOTALS: Totals = { receiptsDeleted: 0, bodiesDropped: 0, shardKeysDeleted: 0, cronRuns: 0 };

/** Bytes in use: pages minus free pages (SQLite files keep freed pages for reuse and never shrink on their own). */
function usedBytes(database: DatabaseSync): number {
  const pragma = (name: string) => (database.prepare(`PRAGMA ${name}`).get() as Record<string, number>)[name]!;
  return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
}

/** Every claim shard's SQLite file under the persist directory. */
function shardFiles(persistDir: string): string[] {
  const root = join(persistDir, "v3", "do");
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((name) => name.includes("ClaimShard"))
    .flatMap((name) => readdirSync(join(root, name)).filter((file) => file.endsWith(".sqlite")).map((file) => join(root, name, file)))
    .filter((file) => statSync(file).size > 0);
}

function readShard(file: string): { bytes: number; keys: number; unrelayed: number; oldestUnrelayed: number | null } {
  const database = new DatabaseSync(file, { readOnly: true });
  try {
    database.exec("PRAGMA busy_timeout = 5000");
    const hasClaims = database.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'event_claims'").get();
    if (!hasClaims) return { bytes: usedBytes(database), keys: 0, unrelayed: 0, oldestUnrelayed: null };
    const row = database
      .prepare(
        `SELECT COUNT(*) AS keys, SUM(relay_pending = 1) AS unrelayed,
           MIN(CASE WHEN relay_pending = 1 THEN received_at END) AS oldest
         FROM event_claims WHERE source = ?`,
      )
      .get(SOAK_SOURCE) as { keys: number; unrelayed: number | null; oldest: number | null };
    return { bytes: usedBytes(database), keys: row.keys, unrelayed: row.unrelayed ?? 0, oldestUnrelayed: row.oldest };
  } finally {
    database.close();
  }
}

/** Events whose credit was applied: the accounts table outlives every retention window. */
export function creditedEvents(store: ReceiptStore): number {
  return store.read((database) => {
    const row = database.prepare("SELECT COALESCE(SUM(credits), 0) AS credited FROM accounts WHERE id LIKE ?").get(`${ACCOUNT_PREFIX}%`) as { credited: number };
    return row.credited;
  });
}

/**
 * Steady state: once the dedupe window and one cron interval have passed, D1's size, the shards' size and the
 * receipts stored stay flat — within the saw-tooth a cron interval makes (what arrives between two runs, on top
 * of a dedupe window's worth) plus 15% — and the backlog stays below 15 seconds of arrivals (processing keeps pace).
 */
export function isSteady(samples: readonly SoakSample[], settings: SoakSettings): boolean {
  const dedupeSeconds = parseMinutes(settings.dedupeRetention) * 60;
  const window = samples.filter((sample) => sample.atSeconds >= dedupeSeconds + settings.cronSeconds && sample.atSeconds <= settings.minutes * 60 + 30);
  if (window.length < 2) return false;
  const sawTooth = ((dedupeSeconds + settings.cronSeconds) / dedupeSeconds) * 1.15;
  const flat = (pick: (sample: SoakSample) => number) => {
    const values = window.map(pick);
    return Math.max(...values) <= sawTooth * Math.max(1, Math.min(...values));
  };
  const keepingPace = window.every((sample) => sample.backlog <= Math.max(50, settings.rate * 15));
  return flat((sample) => sample.d1Bytes) && flat((sample) => sample.shardBytes) && flat((sample) => sample.receipts) && keepingPace;
}

export interface SoakResult {
  samples: SoakSample[];
  steady: boolean;
  /** Acknowledged events whose effect was never applied (should be 0); `duplicated`: applied more than once. */
  lost: number;
  duplicated: number;
  acknowledged: number;
  credited: number;
  resends: number;
  lateStarts: number;
  cronRuns: number;
  settings: SoakSettings;
}

/**
 * The whole phase: send at the rate for the run's minutes while the cron runs on its schedule and a sample is taken
 * every 30 s; then stop sending, keep the cron going until the backlog is empty (up to five minutes) and take the
 * last sample. `onSample` prints each row as it comes.
 */
export async function runSoak(
  origin: () => string,
  persistDir: string,
  sender: Sender,
  store: ReceiptStore,
  settings: SoakSettings,
  onSample: (sample: SoakSample) => void,
): Promise<SoakResult> {
  const startedAt = performance.now();
  const cron = cronSchedule(origin, settings.cronSeconds);
  const samples: SoakSample[] = [];
  let totals = NO_TOTALS;
  const sampleNow = () => {
    const taken = takeSample(store, persistDir, Math.round((performance.now() - startedAt) / 1000), totals);
    totals = taken.totals;
    samples.push(taken.sample);
    onSample(taken.sample);
    return taken.sample;
  };
  let sending = true;
  const sampler = (async () => {
    for (let next = 30; sending; next += 30) {
      while (sending && performance.now() - startedAt < next * 1000) await sleep(250);
      if (sending) sampleNow();
    }
  })();
  const sent = await sendAtRate(sender, settings, { accounts: 200, maxInFlight: 256 });
  sending = false;
  await sampler;
  const drainDeadline = performance.now() + 5 * 60_000;
  let last = sampleNow();
  while (last.backlog > 0 && performance.now() < drainDeadline) {
    await sleep(5000);
    last = takeSample(store, persistDir, Math.round((performance.now() - startedAt) / 1000), totals).sample;
  }
  sampleNow();
  const cronRuns = await cron.stop();
  const credited = creditedEvents(store);
  return {
    samples,
    steady: isSteady(samples, settings),
    lost: Math.max(0, sent.acknowledged - credited),
    duplicated: Math.max(0, credited - sent.acknowledged),
    acknowledged: sent.acknowledged,
    credited,
    resends: sent.resends,
    lateStarts: sent.lateStarts,
    cronRuns,
    settings,
  };
}

/** "90s", "3m", "1h" as minutes (the soak's retention settings). */
export function parseMinutes(duration: string): number {
  const match = /^(\d+)(s|m|h)$/.exec(duration);
  if (!match) throw new Error(`not a duration: ${duration}`);
  const value = Number(match[1]);
  return match[2] === "s" ? value / 60 : match[2] === "m" ? value : value * 60;
}

export function formatSamples(samples: readonly SoakSample[]): string {
  const header = "| t (s) | D1 MB | shards MB | receipts | with body | shard keys | backlog | oldest pending (s) | deleted receipts | dropped bodies | deleted shard keys | cron runs |";
  const rule = "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
  const mb = (bytes: number) => (bytes / 1_048_576).toFixed(2);
  const rows = samples.map(
    (sample) =>
      `| ${sample.atSeconds} | ${mb(sample.d1Bytes)} | ${mb(sample.shardBytes)} | ${sample.receipts} | ${sample.receiptsWithBody} | ${sample.shardKeys} | ` +
      `${sample.backlog} | ${sample.oldestPendingSeconds} | ${sample.receiptsDeleted} | ${sample.bodiesDropped} | ${sample.shardKeysDeleted} | ${sample.cronRuns} |`,
  );
  return [header, rule, ...rows].join("\n");
}
