// `tail [--source S] [--status a,b]`: a live feed of receipts and their attempts, read from the admin API. The
// API has no push channel, so this polls the newest receipts and prints what changed since the last look.
import { CliError } from "../errors.mjs";
import { adminRequest } from "../http.mjs";
import { clock, dim, duration, status } from "../format.mjs";
import { receiverUrl } from "../project.mjs";

const STATUSES = ["pending", "processing", "processed", "stale", "dead", "skipped"];

/**
 * @param {{ source?: string, status?: string, interval?: string, history?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function tail(options) {
  const statuses = options.status?.split(",").map((word) => word.trim()).filter(Boolean) ?? [];
  const unknown = statuses.filter((word) => !STATUSES.includes(word));
  if (unknown.length > 0) throw new CliError(`unknown status ${unknown.join(", ")}: use any of ${STATUSES.join(", ")}`);
  const intervalMs = Math.max(200, Number(options.interval ?? 1000));
  const history = Math.min(200, Math.max(0, Number(options.history ?? 10)));
  const query = new URLSearchParams({ limit: "50" });
  if (options.source) query.set("source", options.source);
  if (statuses.length > 0) query.set("status", statuses.join(","));

  /** @type {Map<string, string>} what we last printed for each receipt: status and attempt count */
  const seen = new Map();
  const first = await adminRequest(options, `/receipts?${query}`);
  const backlog = [...first.receipts].reverse();
  for (const receipt of backlog.slice(Math.max(0, backlog.length - history))) await report(receipt, seen, options);
  for (const receipt of backlog) seen.set(receipt.receiptId, stateOf(receipt));
  console.log(dim(`following ${receiverUrl(options)}${options.source ? ` · source ${options.source}` : ""}${statuses.length ? ` · status ${statuses.join(",")}` : ""} · Ctrl-C to stop`));

  let stopped = false;
  process.once("SIGINT", () => (stopped = true));
  process.once("SIGTERM", () => (stopped = true));
  let lostSince = 0;
  while (!stopped) {
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
    if (stopped) break;
    try {
      const page = await adminRequest(options, `/receipts?${query}`);
      if (lostSince) console.log(dim(`receiver back at ${clock(Date.now())}`));
      lostSince = 0;
      for (const receipt of [...page.receipts].reverse()) await report(receipt, seen, options);
    } catch (error) {
      // A restart of npm start should not end the feed: say so once and keep looking.
      if (!(error instanceof CliError)) throw error;
      if (!lostSince) console.log(dim(`${error.message} — still trying`));
      lostSince ||= Date.now();
    }
  }
  return 0;
}

/** @param {any} receipt */
const stateOf = (receipt) => `${receipt.status}/${receipt.attempts}`;

/**
 * Prints a receipt the first time it is seen, and each attempt and status change after that.
 * @param {any} receipt a receipt summary from the API
 * @param {Map<string, string>} seen
 * @param {import("../project.mjs").ProjectOptions} options
 */
async function report(receipt, seen, options) {
  const before = seen.get(receipt.receiptId);
  const now = stateOf(receipt);
  if (before === now) return;
  seen.set(receipt.receiptId, now);
  const who = `${receipt.source}  ${receipt.receiptId}`;
  if (before === undefined) {
    console.log(`${clock(receipt.receivedAt)}  ${who}  ${receipt.eventType ?? "—"}  key ${receipt.eventKey}  ${status(receipt.status)}${receipt.provenance !== "live" ? ` (${receipt.provenance})` : ""}`);
  }
  const attemptsBefore = before === undefined ? 0 : Number(before.split("/")[1]);
  if (receipt.attempts > attemptsBefore) {
    const detail = await adminRequest(options, `/receipts/${receipt.receiptId}`);
    for (const attempt of detail.attempts.filter((/** @type {any} */ a) => a.attemptNumber > attemptsBefore)) {
      const outcome = `${status(attempt.outcome ?? "running")}${attempt.httpStatus ? ` HTTP ${attempt.httpStatus}` : ""}${attempt.durationMs !== null ? ` ${dim(`(${duration(attempt.durationMs)})`)}` : ""}`;
      console.log(`${clock(attempt.startedAt)}  ${who}  attempt ${attempt.attemptNumber} ${outcome}${attempt.error ? ` — ${attempt.error}` : ""}`);
    }
  }
  if (before !== undefined && before.split("/")[0] !== receipt.status) {
    console.log(`${clock(receipt.processedAt ?? Date.now())}  ${who}  ${status(receipt.status)}${receipt.status === "dead" && receipt.lastError ? ` — ${receipt.lastError}` : ""}`);
  }
}
