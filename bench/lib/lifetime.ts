import { allInCost, formatAllIn, type LifetimeUnits } from "./all-in.ts";
import type { BenchFlags } from "./flags.ts";
import { type HappyPathMeters, meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { type PerEvent, perEvent, readMeters } from "./meters.ts";
import type { Runtime } from "./runtime.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import { ReceiptStore, storedBytes } from "./store.ts";

/**
 * The rest of an event's bill after the happy path (bench/lib/all-in.ts prices it): a few large bodies for their
 * R2 operations, then retention as the cron runs it, fired weeks ahead through wrangler dev's local scheduled route
 * until every one of the run's receipts and shard keys is gone, read from the same meters; and the bytes an event
 * keeps meanwhile.
 */

/** Bodies above the demo source's R2 threshold (64 KB by default). */
const LARGE_BODY_BYTES = 70 * 1024;
const LARGE_EVENTS = 40;
const DAY_MS = 86_400_000;
/** The receiver's defaults (src/sources/config.ts), which the demo source keeps. */
export const PAYLOAD_RETENTION_DAYS = 7;
export const DEDUPE_RETENTION_DAYS = 35;

/**
 * A source that keeps each body as long as its key: `payload_retention` equal to `dedupe_retention`. Its name and
 * its events' keys are as long as the demo source's, so the bytes each row stores compare.
 */
export const KEPT_BODIES_SOURCE = "kept";

/** The demo source's whole life: its happy path (already measured), large bodies, retention and storage. */
export async function meterAllIn(
  context: PhaseContext,
  flags: BenchFlags,
  runtime: Runtime,
  deployment: ReceiverDeployment,
  happy: HappyPathMeters,
  concurrency: number,
) {
  const { events } = happy;
  console.log(`large bodies: ${LARGE_EVENTS} events of ${LARGE_BODY_BYTES / 1024} KB (above the R2 threshold):`);
  const large = await meterHappyPath(context, runtime, deployment, {
    path: "/webhooks/demo",
    keyPrefix: "meter_big_",
    events: LARGE_EVENTS,
    concurrency: Math.min(concurrency, 16),
    padToBytes: LARGE_BODY_BYTES,
  });

  const total = events + LARGE_EVENTS;
  const retention = await meterRetention(context, runtime, deployment, ["meter_evt_", "meter_big_"], total, {
    payloadDays: PAYLOAD_RETENTION_DAYS,
    dedupeDays: DEDUPE_RETENTION_DAYS,
  });
  // Measured once every happy-path event was processed and every claim a tombstone (meterHappyPath waits for both).
  const { before: storedBefore, after: storedProcessed } = happy.stored;
  const storage = {
    d1BytesWithBody: (storedProcessed.d1 - storedBefore.d1) / events,
    // The large events' receipts are in D1 too by then, their bodies in R2: every receipt without its body.
    d1BytesWithoutBody: (retention.storedWithoutBodies.d1 - storedBefore.d1) / total,
    shardBytes: (storedProcessed.shards - storedBefore.shards) / events,
    payloadRetentionDays: PAYLOAD_RETENTION_DAYS,
    dedupeRetentionDays: DEDUPE_RETENTION_DAYS,
  };
  console.log(
    `storage per event (pages): D1 ${storage.d1BytesWithBody.toFixed(0)} bytes with the body, ${storage.d1BytesWithoutBody.toFixed(0)} ` +
      `without it; shard tombstone ${storage.shardBytes.toFixed(0)} bytes`,
  );

  const units: LifetimeUnits = {
    happy: happy.per,
    retention: retentionUnits(retention.perEvent),
    largeBody: {
      r2ClassA: large.per.r2ClassA,
      r2ClassB: large.per.r2ClassB,
      bytes: LARGE_BODY_BYTES,
      payloadRetentionDays: PAYLOAD_RETENTION_DAYS,
    },
    storage,
    largeShare: flags.largeShare,
    cpuMsPerEvent: happy.cpuMsPerEvent.workerd,
  };
  const cost = allInCost(happy.usdPerMillion, units);
  console.log(formatAllIn(cost));
  return {
    units,
    lines: cost.lines,
    allInUsdPerMillion: cost.allInUsdPerMillion,
    large: { perEvent: large.per, cpuMsPerEvent: large.cpuMsPerEvent },
    /** Retention's units per event, every meter (alarm writes too, which `units` leaves out). */
    retention: retention.perEvent,
  };
}

/**
 * The same life for a source that keeps bodies until its keys expire (`payload_retention = "35d"`), on a runtime
 * of its own: the cron's delete takes the body with the receipt, so retention writes no separate body drop, and
 * the body is stored 35 days instead of 7. Large bodies are priced as the demo source's run measured them, kept 35
 * days. What a source with small bodies and no reason to drop them early can save (docs/performance.md).
 */
export async function meterKeptBodies(
  context: PhaseContext,
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  events: number,
  concurrency: number,
  demo: Pick<LifetimeUnits, "largeBody">,
) {
  const runtime = await startMeteredRuntime(
    context,
    deploymentWithSource(deployment, "meters-kept", KEPT_BODIES_SOURCE, {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      destination: "handler:accounts",
      type_path: "type",
      subject_path: "data.account",
      version_path: "data.version",
      payload_retention: `${DEDUPE_RETENTION_DAYS}d`,
      dedupe_retention: `${DEDUPE_RETENTION_DAYS}d`,
    }),
    stateDir,
    "meters-kept",
    8,
  );
  try {
    console.log(
      `kept bodies (a source with payload_retention = dedupe_retention = ${DEDUPE_RETENTION_DAYS}d, otherwise the demo source's; ${events} events):`,
    );
    const happy = await meterHappyPath(context, runtime, deployment, {
      path: `/webhooks/${KEPT_BODIES_SOURCE}`,
      keyPrefix: "meter_kpt_",
      events,
      concurrency,
    });
    const { before: storedBefore, after: storedProcessed } = happy.stored;
    const retention = await meterRetention(context, runtime, deployment, ["meter_kpt_"], events, {
      payloadDays: DEDUPE_RETENTION_DAYS,
      dedupeDays: DEDUPE_RETENTION_DAYS,
    });
    const d1BytesWithBody = (storedProcessed.d1 - storedBefore.d1) / events;
    const units: LifetimeUnits = {
      happy: happy.per,
      retention: retentionUnits(retention.perEvent),
      largeBody: { ...demo.largeBody, payloadRetentionDays: DEDUPE_RETENTION_DAYS },
      storage: {
        d1BytesWithBody,
        d1BytesWithoutBody: d1BytesWithBody,
        shardBytes: (storedProcessed.shards - storedBefore.shards) / events,
        payloadRetentionDays: DEDUPE_RETENTION_DAYS,
        dedupeRetentionDays: DEDUPE_RETENTION_DAYS,
      },
      largeShare: flags.largeShare,
      cpuMsPerEvent: happy.cpuMsPerEvent.workerd,
    };
    console.log(
      `storage per event (pages): D1 ${d1BytesWithBody.toFixed(0)} bytes with the body, kept ${DEDUPE_RETENTION_DAYS} days; ` +
        `shard tombstone ${units.storage.shardBytes.toFixed(0)} bytes`,
    );
    const cost = allInCost(happy.usdPerMillion, units);
    console.log(formatAllIn(cost));
    return { happy, units, lines: cost.lines, allInUsdPerMillion: cost.allInUsdPerMillion };
  } finally {
    await runtime.stop();
  }
}

function retentionUnits(per: PerEvent): LifetimeUnits["retention"] {
  return {
    d1RowsWritten: per.d1RowsWritten,
    d1RowsRead: per.d1RowsRead,
    doRowsWritten: per.doRowsWritten,
    doRowsRead: per.doRowsRead,
    doRequests: per.doRequests,
    logLines: per.logLines,
    analyticsPoints: per.analyticsPoints,
  };
}

/**
 * Retention over the receipts whose event keys start with one of `prefixes`: the cron fired as if past payload
 * retention until none of them keeps a body, then past dedupe retention until none is left, plus one run more
 * (the shards are swept in the same run as D1, and a second confirms nothing was left). Every unit those runs
 * spent, their fixed work included, is divided by `events`. Also the bytes stored once the bodies were gone.
 */
export async function meterRetention(
  context: PhaseContext,
  runtime: Runtime,
  deployment: ReceiverDeployment,
  prefixes: readonly string[],
  events: number,
  windows: { payloadDays: number; dedupeDays: number },
) {
  const store = new ReceiptStore(runtime.options.persistDir);
  const ours = prefixes.map((prefix) => `event_key LIKE '${prefix}%'`).join(" OR ");
  const left = (withBody: boolean) =>
    store.read(
      (database) =>
        (
          database
            .prepare(
              `SELECT COUNT(*) AS n FROM receipts WHERE (${ours})${withBody ? " AND (body IS NOT NULL OR body_location IS NOT NULL)" : ""}`,
            )
            .get() as { n: number }
        ).n,
    );
  const before = await readMeters(runtime.origin, deployment.adminToken);
  const startedAt = Date.now();
  const bodyRuns = await fireCronUntil(
    runtime.origin,
    startedAt + windows.payloadDays * DAY_MS + 60_000,
    () => left(true) === 0,
  );
  const storedWithoutBodies = storedBytes(store, runtime.options.persistDir);
  const keyRuns =
    (await fireCronUntil(runtime.origin, startedAt + windows.dedupeDays * DAY_MS + 60_000, () => left(false) === 0)) +
    (await fireCronUntil(runtime.origin, startedAt + windows.dedupeDays * DAY_MS + 120_000, () => true));
  const after = await readMeters(runtime.origin, deployment.adminToken);
  const per = perEvent(before, after, events, 0);
  console.log(
    `retention: ${bodyRuns} cron run(s) past payload retention (${windows.payloadDays} days), ${keyRuns} past dedupe retention ` +
      `(${windows.dedupeDays} days); receipts left ${left(false)}; per event: D1 rows written ${per.d1RowsWritten.toFixed(3)}, ` +
      `read ${per.d1RowsRead.toFixed(2)}; DO rows written ${per.doRowsWritten.toFixed(3)}, read ${per.doRowsRead.toFixed(2)}; ` +
      `DO requests ${per.doRequests.toFixed(3)}; log lines ${per.logLines.toFixed(3)}`,
  );
  if (left(false) > 0) context.failures.push(`meters: retention left ${left(false)} receipts (${prefixes.join(", ")})`);
  return { perEvent: per, storedWithoutBodies };
}

/** Fires the cron as if at `at` until `done()` (at most 10 runs, each a millisecond later); returns the runs. */
async function fireCronUntil(origin: string, at: number, done: () => boolean): Promise<number> {
  let runs = 0;
  do {
    const response = await fetch(`${origin}/cdn-cgi/local/scheduled?cron=*/5+*+*+*+*&time=${at + runs}`, {
      signal: AbortSignal.timeout(120_000),
    });
    await response.arrayBuffer();
    runs++;
  } while (!done() && runs < 10);
  return runs;
}
