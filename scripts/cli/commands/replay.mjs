// `replay <receipt-id> [--route R]`, `replay --source S [filters] [--dry-run]` (one job: replay-job.mjs) and
// `replay --dead --source S [--route R] [--since T]`: put finished receipts (or one route's deliveries of them) back on
// the queue.
import { CliError, EXIT } from "../errors.mjs";
import { adminRequest } from "../http.mjs";
import { replayJob, showReplayJob } from "./replay-job.mjs";

/**
 * @param {string | undefined} receiptId
 * @param {{ dead?: boolean, source?: string, since?: string, until?: string, type?: string, route?: string, status?: string, error?: string, dryRun?: boolean, job?: string, json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function replay(receiptId, options) {
  if (options.job !== undefined) return showReplayJob(options.job, options);
  if (receiptId === undefined && !options.dead && options.source !== undefined) return replayJob(options);
  if (receiptId !== undefined && options.dead)
    throw new CliError("give either a receipt id or --dead with filters, not both", EXIT.usage);
  if (receiptId !== undefined) {
    // --route: that route's delivery alone; the receipt's other routes are not run again.
    const query = options.route === undefined ? "" : `?route=${encodeURIComponent(options.route)}`;
    /** @type {import("../../../src/admin/actions/replay-actions").ReplayReport} */
    const report = await adminRequest(options, `/receipts/${encodeURIComponent(receiptId)}/replay${query}`, {
      method: "POST",
    });
    const what = options.route === undefined ? report.receiptId : `${report.receiptId} route ${options.route}`;
    console.log(
      options.json
        ? JSON.stringify(report)
        : `replayed ${what}: back to pending, follow it with npm run cli -- show ${report.receiptId}`,
    );
    return 0;
  }
  if (!options.dead)
    throw new CliError(
      "say what to replay: replay <receipt-id> [--route <route>], or replay --source <source> [--route <route>] [--status <status>] [--since <time>] [--dry-run]",
      EXIT.usage,
    );
  if (!options.source)
    throw new CliError(
      "replay --dead needs --source <source>, so one command never replays every source's dead letters at once",
      EXIT.usage,
    );
  let total = 0;
  /** @type {string[]} */
  const ids = [];
  // The API replays at most a bounded batch per call and says "more" while dead letters remain that match; each
  // call goes on after the previous one's cursor, so a dead letter that fails again at once is not replayed twice.
  /** @type {string | undefined} */
  let after;
  for (let round = 0; round < 1000; round += 1) {
    const filter = Object.fromEntries(
      Object.entries({
        source: options.source,
        route: options.route,
        since: options.since,
        until: options.until,
        type: options.type,
        after,
      }).filter(([, value]) => value !== undefined),
    );
    /** @type {import("../../../src/admin/actions/replay-actions").BulkReplayReport} */
    const report = await adminRequest(options, "/dead/replay", { method: "POST", body: filter });
    total += report.replayed;
    ids.push(...report.results.filter((result) => result.outcome === "replayed").map((result) => result.receiptId));
    if (!report.more || !report.cursor || report.cursor === after) break;
    after = report.cursor;
  }
  if (options.json) console.log(JSON.stringify({ replayed: total, receiptIds: ids }));
  else {
    console.log(
      `replayed ${total} dead letter${total === 1 ? "" : "s"} of ${options.source}${options.route ? ` route ${options.route}` : ""}${options.since ? ` since ${options.since}` : ""}`,
    );
    for (const id of ids) console.log(`  ${id}`);
  }
  return 0;
}
