import { join } from "node:path";
import { allInCost, formatAllIn, type LifetimeUnits } from "./all-in.ts";
import type { startForwardBackend } from "./forward-backend.ts";
import { meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { DEDUPE_RETENTION_DAYS, PAYLOAD_RETENTION_DAYS, retentionUnits } from "./lifetime.ts";
import { perEvent, readMeters } from "./meters.ts";
import { perEventFigures } from "./per-event-file.ts";
import { fireCronUntil } from "./retention.ts";
import type { Runtime } from "./runtime.ts";
import { deploymentWithSource, type ReceiverDeployment, withReceiptRing } from "./setup.ts";
import { meterStages, type StageSource } from "./stages.ts";
import { ReceiptStore } from "./store.ts";
import { d1BytesPerReceipt, shardBytesPerTombstone } from "./vacuumed-bytes.ts";

/**
 * The AFTER of issue 35: a source configured the new way — bodies in R2 segments (`body_segments = true`) and
 * receipts in a ring of D1 partitions (`database = "partitions"`) — metered as the demo source is (stages, happy
 * path, retention by the real cron fired past the cutoffs, VACUUMed bytes, all-in at the same prices).
 *
 * Retention windows are short (bodies 1 day, keys 2 days, a ring of 4 one-day partitions: (4 − 2) × 1d holds 2d)
 * so the ring stays 4 local databases instead of 37: what retention writes per event does not depend on the
 * window's length — a segment expires as one object delete whatever its age, a partition is archived a page per 200
 * rows and emptied by one DROP/CREATE batch whatever it holds. Storage is priced at the default windows (7 and 35
 * days) with the measured bytes, as the demo source's is. A partitioned source cannot have an in-Worker handler, so
 * this one forwards to the bench's local backend.
 */

const AFTER_SOURCE = "lean";
const AFTER_KEY_PREFIX = "meter_new_";
const RING = ["DB_P0", "DB_P1", "DB_P2", "DB_P3"];
const DAY_MS = 86_400_000;
const AFTER_WINDOWS = { payloadDays: 1, dedupeDays: 2 };

/**
 * Rows written per event the after must show (alarms apart); retention's is checked apart: 0 in D1. The relay
 * writes 1, the receipt's row alone: a partitioned receipt has no (source, event_key) index entry, its claim shard
 * is its key's only arbiter (migrations/0023, src/relay/receipt-insert.ts). Processing writes 1, the commit, as the
 * demo source's: a forward's first attempt holds the lease the relay's message granted and writes no lease row
 * (src/consumers/lease/relay-grant.ts; it wrote 2 before).
 */
export const AFTER_STAGE_ROWS: StageSource["expected"] = {
  accept: { d1: 0, durableObject: 1 },
  relay: { d1: 1, durableObject: 1 },
  process: { d1: 1, durableObject: 0 },
};

/** The deployment with the lean source and a ring of four local D1 databases bound for it. */
function afterDeployment(deployment: ReceiverDeployment, backendPort: number): ReceiverDeployment {
  const withSource = deploymentWithSource(deployment, "meters-after", AFTER_SOURCE, {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: `http://127.0.0.1:${backendPort}/hooks`,
    database: "partitions",
    body_segments: true,
    payload_retention: `${AFTER_WINDOWS.payloadDays}d`,
    dedupe_retention: `${AFTER_WINDOWS.dedupeDays}d`,
  });
  return withReceiptRing(withSource, { bindings: RING, period: "1d" });
}

/**
 * Retention by the real cron: past payload retention (segment expiry: whole R2 objects deleted, no D1 row), then in
 * the period that readies the events' partition again (archive to R2, then DROP/CREATE), until none of the events'
 * receipts is left, then once past two key windows (the shards' partitions). Returns per-event units, both parts.
 */
async function meterAfterRetention(
  context: PhaseContext,
  runtime: Runtime,
  deployment: ReceiverDeployment,
  events: number,
) {
  const store = new ReceiptStore(runtime.options.persistDir);
  const left = () =>
    store
      .readEach(
        (database) =>
          (
            database
              .prepare("SELECT COUNT(*) AS n FROM receipts WHERE event_key LIKE ?")
              .get(`${AFTER_KEY_PREFIX}%`) as { n: number }
          ).n,
      )
      .reduce((sum, n) => sum + n, 0);
  // The events' period (a ring of 1-day periods from the epoch): they were all sent today or just before.
  const period = Math.floor(Date.now() / DAY_MS);
  const before = await readMeters(runtime.origin, deployment.adminToken);
  const expiryRuns = await fireCronUntil(runtime.origin, (period + 2) * DAY_MS + DAY_MS / 2, () => true, 2);
  const expired = await readMeters(runtime.origin, deployment.adminToken);
  // The ring readies period p + 4's database (p's own) while period p + 3 is written.
  const dropRuns =
    (await fireCronUntil(runtime.origin, (period + 3) * DAY_MS + DAY_MS / 2, () => left() === 0, 20)) +
    (await fireCronUntil(runtime.origin, (period + 5) * DAY_MS + DAY_MS / 2, () => true, 1));
  const after = await readMeters(runtime.origin, deployment.adminToken);
  const segmentExpiry = perEvent(before, expired, events, 0);
  const partitionDrop = perEvent(expired, after, events, 0);
  const all = perEvent(before, after, events, 0);
  const totalD1Written = all.d1RowsWritten * events;
  console.log(
    `retention (after): ${expiryRuns} cron run(s) past payload retention, ${dropRuns} for the partition archive + drop and ` +
      `the shards; receipts left ${left()}; D1 rows written in all ${Math.round(totalD1Written)} over ${expiryRuns + dropRuns} runs ` +
      `(fixed work: the drop's schema rows, the cron's checkpoints), per event ${all.d1RowsWritten.toFixed(3)}; ` +
      `segment expiry per event: D1 written ${segmentExpiry.d1RowsWritten.toFixed(3)}, R2 A ${segmentExpiry.r2ClassA.toFixed(4)}; ` +
      `archive + drop per event: D1 written ${partitionDrop.d1RowsWritten.toFixed(3)}, read ${partitionDrop.d1RowsRead.toFixed(2)}, ` +
      `R2 A ${partitionDrop.r2ClassA.toFixed(4)} B ${partitionDrop.r2ClassB.toFixed(4)}; DO written ${all.doRowsWritten.toFixed(3)}`,
  );
  if (left() > 0) context.failures.push(`meters (after): retention left ${left()} receipts`);
  if (Math.floor(all.d1RowsWritten + 1e-9) !== 0)
    context.failures.push(
      `meters (after): retention wrote ${all.d1RowsWritten.toFixed(3)} D1 rows per event, expected 0 (fixed work only)`,
    );
  return {
    perEvent: all,
    segmentExpiry,
    partitionDrop,
    runs: expiryRuns + dropRuns,
    d1RowsWrittenTotal: Math.round(totalD1Written),
  };
}

/** The after source's stages, happy path, retention, bytes and all-in, on runtimes of its own. */
export async function meterAfterVariant(
  context: PhaseContext,
  deployment: ReceiverDeployment,
  stateDir: string,
  backend: Awaited<ReturnType<typeof startForwardBackend>>,
  events: number,
  stageEvents: number,
  concurrency: number,
) {
  const after = afterDeployment(deployment, backend.port);
  console.log(
    `\nafter (issue 35): source "${AFTER_SOURCE}" with body_segments = true, database = "partitions" over ${RING.length} ` +
      `one-day partitions, forwarding to the local backend:`,
  );
  const stages = await meterStages(context, after, stateDir, stageEvents, concurrency, {
    path: `/webhooks/${AFTER_SOURCE}`,
    keyPrefix: "meter_stn_",
    labels: ["meters-after-accept", "meters-after-stages"],
    portOffsets: [20, 21],
    expected: AFTER_STAGE_ROWS,
  });
  const runtime = await startMeteredRuntime(context, after, stateDir, "meters-after", 22);
  try {
    const happy = await meterHappyPath(context, runtime, deployment, {
      path: `/webhooks/${AFTER_SOURCE}`,
      keyPrefix: AFTER_KEY_PREFIX,
      events,
      concurrency,
    });
    const scratch = join(stateDir, "vacuumed");
    const receipt = d1BytesPerReceipt(new ReceiptStore(runtime.options.persistDir), AFTER_KEY_PREFIX, scratch);
    const tombstone = shardBytesPerTombstone(runtime.options.persistDir, scratch);
    console.log(
      `bytes (after, VACUUMed): D1 receipt ${receipt.perRow.toFixed(0)} (${receipt.rows} rows, mean body in the row ` +
        `${receipt.meanBodyBytes?.toFixed(0)} bytes), shard tombstone ${tombstone.perRow.toFixed(0)}`,
    );
    const retention = await meterAfterRetention(context, runtime, deployment, events);
    const units: LifetimeUnits = {
      happy: happy.per,
      retention: retentionUnits(retention.perEvent, true),
      // Bodies above the R2 threshold go to their own object as before: no large bodies here, the share priced at 0.
      largeBody: { r2ClassA: 0, r2ClassB: 0, bytes: 0, payloadRetentionDays: PAYLOAD_RETENTION_DAYS },
      storage: {
        d1BytesWithBody: receipt.perRow,
        d1BytesWithoutBody: receipt.perRow,
        shardBytes: tombstone.perRow,
        payloadRetentionDays: PAYLOAD_RETENTION_DAYS,
        dedupeRetentionDays: DEDUPE_RETENTION_DAYS,
      },
      largeShare: 0,
      cpuMsPerEvent: happy.cpuMsPerEvent.workerd,
    };
    const cost = allInCost(happy.usdPerMillion, units);
    console.log(formatAllIn(cost));
    return { stages, happy, receipt, tombstone, retention, units, cost };
  } finally {
    await runtime.stop();
  }
}

/**
 * The after's per-event figures, in the fields the capacity model reads (per-event-file.ts), with the retention
 * split by what it is now (segment expiry, partition archive + drop) and R2 operations of every stage.
 */
export function afterFigures(measured: Awaited<ReturnType<typeof meterAfterVariant>>, command: string) {
  const { stages, happy, receipt, tombstone, retention, cost } = measured;
  if (!stages) return null;
  const figures = perEventFigures(
    {
      stages,
      bodyDrop: retention.segmentExpiry,
      deletes: retention.partitionDrop,
      retentionEvents: happy.events,
      happy: happy.per,
      happyEvents: happy.events,
      largeBody: { r2ClassA: 0, r2ClassB: 0 },
      largeShare: 0,
      cpuMs: happy.cpuMsPerEvent.workerd,
      allInUsdPerMillion: cost.allInUsdPerMillion,
      bytes: {
        withBody: { small: receipt, typical: receipt },
        withoutBody: { small: receipt, typical: receipt },
        tombstone,
      },
    },
    command,
  );
  const round = (value: number) => Math.round(value * 1000) / 1000;
  const { bodyDrop, deletes } = figures.retentionRowsWritten;
  return {
    ...figures,
    configuredAs: `source "${AFTER_SOURCE}": body_segments = true, database = "partitions" (a ring of ${RING.length} one-day partitions), a forward destination`,
    measuredBy: {
      ...figures.measuredBy,
      note:
        `${figures.measuredBy.note}; after (issue 35): bodies in R2 segments, receipts in a partition ring; retention: segment ` +
        `expiry, then the partition archived and dropped, ${retention.runs} cron runs writing ${retention.d1RowsWrittenTotal} D1 rows ` +
        "in all (fixed work); windows 1d/2d measured, storage priced at 7d/35d; no large bodies (priced at 0)",
    },
    d1BytesPerReceiptByBody: [
      { bodyBytes: 77, withBody: Math.round(receipt.perRow), afterBodyDrop: Math.round(receipt.perRow) },
    ],
    retentionRowsWritten: { segmentExpiry: bodyDrop, partitionArchiveAndDrop: deletes },
    retentionD1RowsWrittenTotal: retention.d1RowsWrittenTotal,
    r2: {
      classA: round(happy.per.r2ClassA + retention.perEvent.r2ClassA),
      classB: round(happy.per.r2ClassB + retention.perEvent.r2ClassB),
    },
  };
}
