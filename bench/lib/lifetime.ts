import { join } from "node:path";
import { allInCost, formatAllIn, type LifetimeUnits } from "./all-in.ts";
import type { BenchFlags } from "./flags.ts";
import { type HappyPathMeters, meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import type { PerEvent } from "./meters.ts";
import { meterRetention } from "./retention.ts";
import type { Runtime } from "./runtime.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { d1BytesPerReceipt, formatVacuumedBytes, shardBytesPerTombstone } from "./vacuumed-bytes.ts";

/**
 * The rest of an event's bill after the happy path (bench/lib/all-in.ts prices it): a few large bodies for their
 * R2 operations, then retention as the cron runs it, fired weeks ahead through wrangler dev's local scheduled route
 * until every one of the run's receipts and shard keys is gone, read from the same meters; and the bytes an event
 * keeps meanwhile.
 */

/** Bodies above the demo source's R2 threshold (64 KB by default). */
const LARGE_BODY_BYTES = 70 * 1024;
const LARGE_EVENTS = 40;
/** The receiver's defaults (src/sources/config.ts), which the demo source keeps. */
export const PAYLOAD_RETENTION_DAYS = 7;
export const DEDUPE_RETENTION_DAYS = 35;

/**
 * A source that keeps each body as long as its key: `payload_retention` equal to `dedupe_retention`. Its name and
 * its events' keys are as long as the demo source's, so the bytes each row stores compare.
 */
export const KEPT_BODIES_SOURCE = "kept";

/** A body of about 3,000 bytes (a typical Stripe or GitHub event): the demo event padded. */
const TYPICAL_BODY_PADDING = 2912;

/**
 * The demo source's whole life: its happy path (already measured, 80-byte bodies), large bodies, as many events
 * with 3 KB bodies, retention and storage (VACUUMed bytes per receipt for both body sizes, before and after the
 * body drop, and per shard tombstone: vacuumed-bytes.ts).
 */
export async function meterAllIn(
  context: PhaseContext,
  flags: BenchFlags,
  runtime: Runtime,
  deployment: ReceiverDeployment,
  happy: HappyPathMeters,
  concurrency: number,
  stateDir: string,
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
  console.log(`3 KB bodies: ${events} events (for the bytes a receipt keeps):`);
  await meterHappyPath(context, runtime, deployment, {
    path: "/webhooks/demo",
    keyPrefix: "meter_3kb_",
    events,
    concurrency,
    padToBytes: TYPICAL_BODY_PADDING,
  });

  const store = new ReceiptStore(runtime.options.persistDir);
  const scratch = join(stateDir, "vacuumed");
  const receiptBytes = () => ({
    small: d1BytesPerReceipt(store, "meter_evt_", scratch),
    typical: d1BytesPerReceipt(store, "meter_3kb_", scratch),
  });
  const withBody = receiptBytes();
  const tombstone = shardBytesPerTombstone(runtime.options.persistDir, scratch);
  let withoutBody = withBody;
  const total = 2 * events + LARGE_EVENTS;
  const retention = await meterRetention(
    context,
    runtime,
    deployment,
    ["meter_evt_", "meter_big_", "meter_3kb_"],
    total,
    { payloadDays: PAYLOAD_RETENTION_DAYS, dedupeDays: DEDUPE_RETENTION_DAYS },
    () => {
      withoutBody = receiptBytes();
    },
  );
  const bytes = { withBody, withoutBody, tombstone };
  console.log(formatVacuumedBytes(bytes));
  const storage = {
    d1BytesWithBody: withBody.small.perRow,
    d1BytesWithoutBody: withoutBody.small.perRow,
    shardBytes: tombstone.perRow,
    payloadRetentionDays: PAYLOAD_RETENTION_DAYS,
    dedupeRetentionDays: DEDUPE_RETENTION_DAYS,
  };

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
    /** Retention's units per event, every meter (alarm writes too, which `units` leaves out); and apart. */
    retention: retention.perEvent,
    bodyDrop: retention.bodyDrop,
    deletes: retention.deletes,
    retentionEvents: total,
    bytes,
  };
}

/**
 * The same life for a source that keeps bodies until its keys expire (`payload_retention = "35d"`), on a runtime
 * of its own: the cron's delete takes the body with the receipt, so retention writes no separate body drop, and
 * the body is stored 35 days instead of 7. Large bodies are priced as the demo source's run measured them, kept 35
 * days. What a source with small bodies and no reason to drop them early can save (docs/performance.md). Bytes
 * VACUUMed, as the demo source's.
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
    const scratch = join(stateDir, "vacuumed");
    const receipt = d1BytesPerReceipt(new ReceiptStore(runtime.options.persistDir), "meter_kpt_", scratch);
    const tombstone = shardBytesPerTombstone(runtime.options.persistDir, scratch);
    const retention = await meterRetention(context, runtime, deployment, ["meter_kpt_"], events, {
      payloadDays: DEDUPE_RETENTION_DAYS,
      dedupeDays: DEDUPE_RETENTION_DAYS,
    });
    const d1BytesWithBody = receipt.perRow;
    const units: LifetimeUnits = {
      happy: happy.per,
      retention: retentionUnits(retention.perEvent),
      largeBody: { ...demo.largeBody, payloadRetentionDays: DEDUPE_RETENTION_DAYS },
      storage: {
        d1BytesWithBody,
        d1BytesWithoutBody: d1BytesWithBody,
        shardBytes: tombstone.perRow,
        payloadRetentionDays: DEDUPE_RETENTION_DAYS,
        dedupeRetentionDays: DEDUPE_RETENTION_DAYS,
      },
      largeShare: flags.largeShare,
      cpuMsPerEvent: happy.cpuMsPerEvent.workerd,
    };
    console.log(
      `storage per event (VACUUMed): D1 ${d1BytesWithBody.toFixed(0)} bytes with the body, kept ${DEDUPE_RETENTION_DAYS} days; ` +
        `shard tombstone ${units.storage.shardBytes.toFixed(0)} bytes`,
    );
    const cost = allInCost(happy.usdPerMillion, units);
    console.log(formatAllIn(cost));
    return { happy, units, lines: cost.lines, allInUsdPerMillion: cost.allInUsdPerMillion };
  } finally {
    await runtime.stop();
  }
}

/** Retention's units per event for the all-in; R2 operations only where retention made some (segments, archive). */
export function retentionUnits(per: PerEvent, withR2 = false): LifetimeUnits["retention"] {
  return {
    d1RowsWritten: per.d1RowsWritten,
    d1RowsRead: per.d1RowsRead,
    doRowsWritten: per.doRowsWritten,
    doRowsRead: per.doRowsRead,
    doRequests: per.doRequests,
    logLines: per.logLines,
    analyticsPoints: per.analyticsPoints,
    ...(withR2 ? { r2ClassA: per.r2ClassA, r2ClassB: per.r2ClassB } : {}),
  };
}
