import type { PhaseContext } from "./happy-path.ts";
import { perEvent, readMeters } from "./meters.ts";
import type { Runtime } from "./runtime.ts";
import type { ReceiverDeployment } from "./setup.ts";
import { ReceiptStore, storedBytes } from "./store.ts";

const DAY_MS = 86_400_000;

/**
 * Retention over the receipts whose event keys start with one of `prefixes`: the cron fired as if past payload
 * retention until none of them keeps a body, then past dedupe retention until none is left, plus one run more
 * (the shards are swept in the same run as D1, and a second confirms nothing was left). Every unit those runs
 * spent, their fixed work included, is divided by `events`, in all and apart for the body drop and the deletes.
 * Also the bytes stored once the bodies were gone; `afterBodyDrop` runs then (the VACUUMed bytes).
 */
export async function meterRetention(
  context: PhaseContext,
  runtime: Runtime,
  deployment: ReceiverDeployment,
  prefixes: readonly string[],
  events: number,
  windows: { payloadDays: number; dedupeDays: number },
  afterBodyDrop?: () => void,
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
  afterBodyDrop?.();
  const dropped = await readMeters(runtime.origin, deployment.adminToken);
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
  // Apart: the runs past payload retention (the body drop) and those past dedupe retention (the deletes).
  return {
    perEvent: per,
    bodyDrop: perEvent(before, dropped, events, 0),
    deletes: perEvent(dropped, after, events, 0),
    storedWithoutBodies,
  };
}

/** Fires the cron as if at `at` until `done()` (at most `max` runs, each a millisecond later); returns the runs. */
export async function fireCronUntil(origin: string, at: number, done: () => boolean, max = 10): Promise<number> {
  let runs = 0;
  do {
    const response = await fetch(`${origin}/cdn-cgi/local/scheduled?cron=*/5+*+*+*+*&time=${at + runs}`, {
      signal: AbortSignal.timeout(120_000),
    });
    await response.arrayBuffer();
    runs++;
  } while (!done() && runs < max);
  return runs;
}
