// `replay --source S [--route R] [--status dead|skipped|processed] [--type T] [--since T] [--until T] [--error TEXT]
// [--dry-run]` and `replay --job KEY`: a bulk replay job by filter (POST /admin/api/replays), or its progress.
import { adminRequest } from "../http.mjs";

/**
 * @typedef {{ jobKey: string, source: string, route: string | null, state: string, scanned: number, replayed: number, expired: number }} JobView
 * @param {{ source?: string, route?: string, status?: string, type?: string, since?: string, until?: string, error?: string, dryRun?: boolean, json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function replayJob(options) {
  const filter = Object.fromEntries(
    Object.entries({
      source: options.source,
      route: options.route,
      status: options.status,
      type: options.type,
      since: options.since,
      until: options.until,
      error: options.error,
    }).filter(([, value]) => value !== undefined),
  );
  const what = `${options.status ?? "dead"} deliveries of ${options.source}${options.route ? ` route ${options.route}` : ""}`;
  if (options.dryRun) {
    /** @type {{ count: number, expired: number, complete: boolean, sample: { receiptId: string, route: string | null, kind: string }[] }} */
    const answer = await adminRequest(options, "/replays", { method: "POST", body: { filter, dryRun: true } });
    if (options.json) console.log(JSON.stringify(answer));
    else {
      console.log(
        `would replay ${answer.complete ? "" : "at least "}${answer.count} ${what} (dry run: nothing replayed)`,
      );
      if (answer.expired > 0)
        console.log(`${answer.expired} more matched, past payload retention: nothing left to send`);
      for (const row of answer.sample)
        console.log(`  ${row.receiptId}  ${row.route ?? "(its own route)"}  ${row.kind}`);
    }
    return 0;
  }
  /** @type {{ job: JobView }} */
  const { job } = await adminRequest(options, "/replays", { method: "POST", body: { filter } });
  printJob(job, options);
  return 0;
}

/**
 * @param {string} jobKey
 * @param {{ json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function showReplayJob(jobKey, options) {
  /** @type {{ job: JobView }} */
  const { job } = await adminRequest(options, `/replays/${encodeURIComponent(jobKey)}`);
  printJob(job, options);
  return 0;
}

/**
 * @param {JobView} job
 * @param {{ json?: boolean }} options
 */
function printJob(job, options) {
  if (options.json) return console.log(JSON.stringify(job));
  console.log(
    `replay job ${job.jobKey} ${job.state}: replayed ${job.replayed} of ${job.source}${job.route ? ` route ${job.route}` : ""} (${job.scanned} receipts walked${job.expired > 0 ? `, ${job.expired} past payload retention` : ""})`,
  );
  if (job.state === "running")
    console.log(`the cron goes on with it; follow it with npm run cli -- replay --job ${job.jobKey}`);
}
