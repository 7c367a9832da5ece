import { readFileSync, writeFileSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import { type PhaseContext, sendHappyEvents, startMeteredRuntime } from "./happy-path.ts";
import { type PerEvent, perEvent, readMeters } from "./meters.ts";
import { heldBackDeployment, type ReceiverDeployment } from "./setup.ts";
import { FINISHED_STATUSES, ReceiptStore, shardFiles } from "./store.ts";
import { waitUntilFinished } from "./wait.ts";

/**
 * An event's units stage by stage, each measured on its own from the runtime's meters:
 *   accept   a runtime with the relay held back (setup.ts heldBackDeployment): the claim alone;
 *   relay    a runtime whose queue consumer waits (a batch timeout of 60 s): once every claim is a receipt in D1 and
 *            a tombstone in its shard, and before any receipt is processed, its reading less accept's;
 *   process  the same runtime once every receipt is processed, less that reading.
 * Retention is measured by the all-in run's cron (lifetime.ts). Alarm writes fall where they happen: an alarm per
 * shard at the first held claim in accept, an alarm per relay batch in relay.
 */

export const STAGES = ["accept", "relay", "process", "retention"] as const;
export type Stage = (typeof STAGES)[number];

/** Rows written per event the design fixes (test/pipeline/lifetime-budget.test.ts); alarms apart. */
export const STAGE_ROWS_WRITTEN: Record<Exclude<Stage, "retention">, { d1: number; durableObject: number }> = {
  accept: { d1: 0, durableObject: 1 },
  relay: { d1: 2, durableObject: 1 },
  process: { d1: 1, durableObject: 0 },
};

const STAGE_KEY_PREFIX = "meter_stg_";

export function minus(after: PerEvent, before: PerEvent): PerEvent {
  const delta = { ...after };
  for (const key of Object.keys(delta) as (keyof PerEvent)[]) delta[key] = after[key] - before[key];
  return delta;
}

/** The deployment with its work queue's consumer waiting up to 60 s for 100 messages, so relay and processing part. */
function heldConsumerDeployment(deployment: ReceiverDeployment): ReceiverDeployment {
  const config = readFileSync(deployment.configPath, "utf8");
  const held = config.replace(
    /(\[\[queues\.consumers\]\]\nqueue = "webhook-work"\n)max_batch_size = \d+\nmax_batch_timeout = [\d.]+\n/,
    "$1max_batch_size = 100\nmax_batch_timeout = 60\n",
  );
  if (held === config)
    throw new Error(`the work queue's consumer is not where the bench expects it in ${deployment.configPath}`);
  const configPath = deployment.configPath.replace(/wrangler(-[a-z-]+)?\.toml$/, "wrangler-held-consumer.toml");
  writeFileSync(configPath, held);
  return { ...deployment, configPath };
}

/** Claims still waiting for their relay, over every shard (read-only). */
function unrelayedClaims(persistDir: string): number {
  return shardFiles(persistDir).reduce((sum, file) => {
    const database = new DatabaseSync(file, { readOnly: true });
    try {
      database.exec("PRAGMA busy_timeout = 5000");
      const tables = database
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'event_claims%'")
        .all() as Array<{ name: string }>;
      return (
        sum +
        tables.reduce(
          (count, { name }) =>
            count +
            (database.prepare(`SELECT COUNT(*) AS n FROM "${name}" WHERE relay_pending = 1`).get() as { n: number }).n,
          0,
        )
      );
    } finally {
      database.close();
    }
  }, 0);
}

export interface StageSplit {
  events: number;
  accept: PerEvent;
  relay: PerEvent;
  process: PerEvent;
}

/** Whose stages: the demo source's (the default), or another source's on runtimes of their own. */
export interface StageSource {
  path: string;
  keyPrefix: string;
  /** Runtime labels and port offsets: accept's, then relay and process's. */
  labels: [string, string];
  portOffsets: [number, number];
  expected: Record<Exclude<Stage, "retention">, { d1: number; durableObject: number }>;
}

export const DEMO_STAGES: StageSource = {
  path: "/webhooks/demo",
  keyPrefix: STAGE_KEY_PREFIX,
  labels: ["meters-accept", "meters-stages"],
  portOffsets: [3, 2],
  expected: STAGE_ROWS_WRITTEN,
};

export async function meterStages(
  context: PhaseContext,
  deployment: ReceiverDeployment,
  stateDir: string,
  events: number,
  concurrency: number,
  source: StageSource = DEMO_STAGES,
): Promise<StageSplit | null> {
  const { keyPrefix } = source;
  const run = { path: source.path, keyPrefix, events, concurrency };
  console.log(
    `stages of ${source.path} (${events} events each: accept with the relay held back, then relay and process apart):`,
  );
  const heldBack = await startMeteredRuntime(
    context,
    heldBackDeployment(deployment, stateDir),
    stateDir,
    source.labels[0],
    source.portOffsets[0],
  );
  const acceptBefore = await readMeters(heldBack.origin, deployment.adminToken);
  const acceptDeliveries = await sendHappyEvents(heldBack, deployment, run);
  const accept = perEvent(
    acceptBefore,
    await readMeters(heldBack.origin, deployment.adminToken),
    events,
    acceptDeliveries,
  );
  const reachedD1 = new ReceiptStore(heldBack.options.persistDir).statusCounts(keyPrefix);
  await heldBack.stop();
  if (reachedD1.size > 0) context.failures.push("meters (stages): a claim reached D1 while the relay was held back");

  const runtime = await startMeteredRuntime(
    context,
    heldConsumerDeployment(deployment),
    stateDir,
    source.labels[1],
    source.portOffsets[1],
  );
  try {
    const store = new ReceiptStore(runtime.options.persistDir);
    const before = await readMeters(runtime.origin, deployment.adminToken);
    const startedAt = performance.now();
    const deliveries = await sendHappyEvents(runtime, deployment, run);
    const deadline = Date.now() + 45_000;
    const total = () => [...store.statusCounts(keyPrefix).values()].reduce((sum, n) => sum + n, 0);
    while ((total() < events || unrelayedClaims(runtime.options.persistDir) > 0) && Date.now() < deadline)
      await sleep(200);
    const relayed = await readMeters(runtime.origin, deployment.adminToken);
    const counts = store.statusCounts(keyPrefix);
    const processedEarly = FINISHED_STATUSES.reduce((sum, status) => sum + (counts.get(status) ?? 0), 0);
    if (total() < events || processedEarly > 0) {
      context.failures.push(
        `meters (stages): relay and processing did not part (${total()} of ${events} relayed, ${processedEarly} processed at the reading)`,
      );
      return null;
    }
    await waitUntilFinished(store, keyPrefix, events, {
      origin: () => runtime.origin,
      startedAt,
      cronAfterMs: 120_000,
    });
    await sleep(3000);
    const after = await readMeters(runtime.origin, deployment.adminToken);
    const acceptAndRelay = perEvent(before, relayed, events, deliveries);
    const split = {
      events,
      accept,
      relay: minus(acceptAndRelay, accept),
      process: minus(perEvent(before, after, events, deliveries), acceptAndRelay),
    };
    for (const stage of ["accept", "relay", "process"] as const) {
      const units = split[stage];
      console.log(
        `  ${stage.padEnd(8)} D1 rows written ${units.d1RowsWritten.toFixed(3)}, read ${units.d1RowsRead.toFixed(2)}; DO rows written ` +
          `${units.doRowsWritten.toFixed(3)} (alarms ${units.alarmWrites.toFixed(3)}), read ${units.doRowsRead.toFixed(2)}; ` +
          `DO requests ${units.doRequests.toFixed(3)}; queue operations ${units.queueOperations.toFixed(3)}`,
      );
      const expected = source.expected[stage];
      const measured = {
        d1: Math.floor(split[stage].d1RowsWritten + 1e-9),
        durableObject: Math.floor(split[stage].doRowsWritten - split[stage].alarmWrites + 1e-9),
      };
      if (measured.d1 !== expected.d1 || measured.durableObject !== expected.durableObject)
        context.failures.push(
          `meters (stages of ${source.path}): ${stage} wrote ${JSON.stringify(measured)} rows per event, expected ${JSON.stringify(expected)}`,
        );
    }
    return split;
  } finally {
    await runtime.stop();
  }
}
