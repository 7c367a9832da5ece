// `tail [--source S] [--status a,b] [--window 6h]`: a live feed of receipts and their attempts, read from the admin
// API. The API has no push channel, so this polls the newest receipts, and every few seconds asks what changed
// since the last look among receipts received in the window (`changedSince`): a retry, replay or dismissal of
// an older receipt shows up too. That second question reads every receipt received in the window, so it is asked
// less often (CHANGES_EVERY_MS) and the window is a flag. Each look is a line in the dev server's log, so while
// nothing happens the looks slow down (doubling up to IDLE_MAX_MS) and speed back up at the first news.
// Duplicates keep no receipt: with --source, their count is read from the claim shards' tally (the stats).
import { CliError, EXIT } from "../errors.mjs";
import { clock, dim, duration, printable, status } from "../format.mjs";
import { adminRequest } from "../http.mjs";
import { receiverUrl } from "../project.mjs";

const STATUSES = ["pending", "processing", "processed", "stale", "dead", "skipped"];
/** How often the window is asked for changes at most. */
const CHANGES_EVERY_MS = 5_000;
/** The longest wait between looks while nothing is new: news seen later than this after the relay is too late. */
const IDLE_MAX_MS = 5_000;
/** How often the duplicate tally is read (it asks each of the source's shards). */
const DUPLICATES_EVERY_MS = 10_000;

/**
 * @param {{ source?: string, status?: string, interval?: string, history?: string, page?: string, window?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function tail(options) {
  const statuses =
    options.status
      ?.split(",")
      .map((word) => word.trim())
      .filter(Boolean) ?? [];
  const unknown = statuses.filter((word) => !STATUSES.includes(word));
  if (unknown.length > 0)
    throw new CliError(`unknown status ${unknown.join(", ")}: use any of ${STATUSES.join(", ")}`, EXIT.usage);
  const intervalMs = Math.max(200, Number(options.interval ?? 1000));
  const history = Math.min(200, Math.max(0, Number(options.history ?? 10)));
  const page = Number(options.page ?? 50);
  if (!Number.isInteger(page) || page < 1 || page > 200)
    throw new CliError(`--page ${options.page}: use a whole number from 1 to 200`, EXIT.usage);
  const query = new URLSearchParams({ limit: String(page) });
  if (options.source) query.set("source", options.source);
  if (statuses.length > 0) query.set("status", statuses.join(","));
  const window = options.window ?? "6h";
  if (!/^\d+(ms|s|m|h|d)$/.test(window))
    throw new CliError(`--window ${window}: use a duration like 30m, 6h or 2d (at most 7d)`, EXIT.usage);
  const changes = new URLSearchParams(query);
  changes.set("window", window);
  changes.set("limit", "200");
  let changesCursor = String(Date.now());
  let changesAskedAt = Date.now();

  /** @type {Map<string, Seen>} what was last printed for each receipt */
  const seen = new Map();
  /** @type {import("../../../src/admin/receipts/receipt-slice").Page<import("../../../src/admin/receipts/receipt-slice").ReceiptSummary>} */
  const first = await adminRequest(options, `/receipts?${query}`);
  const backlog = [...first.receipts].reverse();
  /** @type {Line[]} */
  const shown = [];
  for (const receipt of backlog.slice(Math.max(0, backlog.length - history)))
    shown.push(...(await report(receipt, seen, options)).lines);
  printInTimeOrder(shown);
  // The rest of the first page is history: from now on only what happens to them is news.
  const watchedFrom = Date.now();
  for (const receipt of backlog) {
    if (!seen.has(receipt.receiptId))
      seen.set(receipt.receiptId, {
        state: stateOf(receipt),
        status: receipt.status,
        lastAttempt: 0,
        replays: receipt.replayCount ?? 0,
        from: watchedFrom,
      });
  }
  console.log(
    dim(
      `following ${receiverUrl(options)}${options.source ? ` · source ${options.source}` : ""}${statuses.length ? ` · status ${statuses.join(",")}` : ""} · Ctrl-C to stop`,
    ),
  );

  let stopped = false;
  /** @type {() => void} */
  let wake = () => {};
  const stop = () => {
    stopped = true;
    wake();
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  const duplicates = options.source ? await duplicateTally(options, options.source) : null;
  let duplicatesAskedAt = Date.now();
  let lostSince = 0;
  let waitMs = intervalMs;
  while (!stopped) {
    await new Promise((resolve) => {
      wake = () => resolve(undefined);
      setTimeout(resolve, waitMs);
    });
    if (stopped) break;
    let news = false;
    /** @type {Line[]} every line of this look, printed in time order at its end */
    const lines = [];
    const look = async (/** @type {Parameters<typeof report>} */ ...args) => {
      const reported = await report(...args);
      lines.push(...reported.lines);
      return reported.changed;
    };
    try {
      /** @type {import("../../../src/admin/receipts/receipt-slice").Page<import("../../../src/admin/receipts/receipt-slice").ReceiptSummary>} */
      const newest = await adminRequest(options, `/receipts?${query}`);
      if (lostSince) console.log(dim(`receiver back at ${clock(Date.now())}`));
      lostSince = 0;
      for (const receipt of [...newest.receipts].reverse()) news = (await look(receipt, seen, options)) || news;
      if (Date.now() - changesAskedAt >= Math.max(intervalMs, CHANGES_EVERY_MS)) {
        changesAskedAt = Date.now();
        let more = true;
        while (more && !stopped) {
          changes.set("changedSince", changesCursor);
          /** @type {import("../../../src/admin/receipts/receipt-changes").ChangesPage} */
          const changed = await adminRequest(options, `/receipts?${changes}`);
          for (const receipt of changed.receipts)
            news = (await look(receipt, seen, options, Number(changesCursor.split(".")[0]))) || news;
          ({ changesCursor, more } = changed);
        }
      }
      if (duplicates && options.source && Date.now() - duplicatesAskedAt >= DUPLICATES_EVERY_MS) {
        duplicatesAskedAt = Date.now();
        const fresh = await duplicates.fresh();
        if (fresh > 0) {
          lines.push([
            Date.now(),
            `${options.source}  ${fresh} duplicate deliver${fresh === 1 ? "y" : "ies"} ${dim("(answered with the first receipt; a duplicate stores nothing)")}`,
          ]);
          news = true;
        }
      }
      printInTimeOrder(lines);
    } catch (error) {
      printInTimeOrder(lines);
      // A restart of npm start should not end the feed: say so once and keep looking.
      if (!(error instanceof CliError)) throw error;
      if (!lostSince) console.log(dim(`${error.message} — still trying`));
      lostSince ||= Date.now();
    }
    waitMs = news ? intervalMs : Math.min(Math.max(intervalMs, IDLE_MAX_MS), waitMs * 2);
  }
  return 0;
}

/**
 * The source's duplicate deliveries since tail started, from the claim shards' hourly tally (GET /stats?source=…):
 * `fresh()` answers how many arrived since it was last asked. Null when the source has no tally (not configured).
 * @param {import("../project.mjs").ProjectOptions} options
 * @param {string} source
 */
async function duplicateTally(options, source) {
  const read = async () => {
    /** @type {import("../../../src/admin/stats/stats").StatsReport} */
    const stats = await adminRequest(options, `/stats?source=${encodeURIComponent(source)}&window=2h`);
    const hours = /** @type {{ hour: number, deliveries: number }[] | null | undefined} */ (
      stats.sources?.[0]?.duplicatesByHour
    );
    return hours ? new Map(hours.map((row) => [row.hour, row.deliveries])) : null;
  };
  /** @type {Map<number, number> | null} */
  let counted;
  try {
    counted = await read();
  } catch (error) {
    if (error instanceof CliError) return null;
    throw error;
  }
  if (!counted) return null;
  return {
    async fresh() {
      const now = await read();
      if (!now) return 0;
      let added = 0;
      for (const [hour, deliveries] of now) added += Math.max(0, deliveries - (counted?.get(hour) ?? 0));
      counted = now;
      return added;
    },
  };
}

/** @param {import("../../../src/admin/receipts/receipt-slice").ReceiptSummary} receipt */
const stateOf = (receipt) => `${receipt.status}/${receipt.attempts}/${receipt.replayCount ?? 0}`;

/**
 * @typedef {{ state: string, status: string, lastAttempt: number, replays: number, from: number }} Seen what was last
 * printed of a receipt: its state, the highest attempt and replay numbers shown (both only ever grow), and the
 * time from which its attempts are news (0: all of them)
 */

/**
 * Prints a receipt the first time it is seen, and each attempt, replay and status change after that. An older
 * receipt first seen because it changed (`changedFrom`, the changes cursor's time) shows only what happened since
 * then, not its whole history (`show` has that). Answers whether anything about it changed, and the lines to print
 * (the caller prints a whole look's lines in time order).
 * @param {import("../../../src/admin/receipts/receipt-slice").ReceiptSummary} receipt a receipt summary from the API
 * @param {Map<string, Seen>} seen
 * @param {import("../project.mjs").ProjectOptions} options
 * @param {number} [changedFrom]
 */
async function report(receipt, seen, options, changedFrom) {
  const before = seen.get(receipt.receiptId);
  const state = stateOf(receipt);
  /** @type {Line[]} */
  const lines = [];
  if (before?.state === state) return { changed: false, lines };
  const who = `${receipt.source}  ${receipt.receiptId}`;
  if (before === undefined) {
    const older = changedFrom !== undefined ? dim(" (received earlier, changed now)") : "";
    lines.push([
      receipt.receivedAt,
      `${who}  ${receipt.eventType ? printable(receipt.eventType) : "—"}  key ${printable(receipt.eventKey)}  ${status(receipt.status)}${receipt.provenance !== "live" ? ` (${receipt.provenance})` : ""}${older}`,
    ]);
  }
  const statusChanged = before !== undefined && before.status !== receipt.status;
  const from = before?.from ?? changedFrom ?? 0;
  const next = {
    state,
    status: receipt.status,
    lastAttempt: before?.lastAttempt ?? 0,
    replays: before?.replays ?? 0,
    from,
  };
  /** @type {number | null} */
  let replayedAt = null;
  if (receipt.attempts > 0 || (receipt.replayCount ?? 0) > next.replays || statusChanged) {
    /** @type {import("../../../src/admin/receipts/receipt-detail").ReceiptDetail} */
    const detail = await adminRequest(options, `/receipts/${receipt.receiptId}`);
    replayedAt = detail.receipt.replayedAt ?? null;
    for (const replay of detail.replays ?? []) {
      const fresh = replay.replayNumber > next.replays && replay.replayedAt >= from;
      if (fresh)
        lines.push([
          replay.replayedAt,
          `${who}  replayed${replay.previousStatus ? ` (was ${replay.previousStatus})` : ""}`,
        ]);
      next.replays = Math.max(next.replays, replay.replayNumber);
    }
    for (const attempt of detail.attempts) {
      const fresh = attempt.attemptNumber > next.lastAttempt && (attempt.finishedAt ?? attempt.startedAt) >= from;
      if (!fresh) continue;
      const outcome = `${status(attempt.outcome ?? "running")}${attempt.httpStatus ? ` HTTP ${attempt.httpStatus}` : ""}${attempt.durationMs !== null ? ` ${dim(`(${duration(attempt.durationMs)})`)}` : ""}`;
      lines.push([
        attempt.startedAt,
        `${who}  attempt ${attempt.attemptNumber} ${outcome}${attempt.error ? ` — ${printable(attempt.error)}` : ""}`,
      ]);
    }
    next.lastAttempt = Math.max(next.lastAttempt, ...detail.attempts.map((attempt) => attempt.attemptNumber));
  }
  if (statusChanged) {
    lines.push([
      statusEnteredAt(receipt, replayedAt, Date.now()),
      `${who}  ${status(receipt.status)}${receipt.status === "dead" && receipt.lastError ? ` — ${printable(receipt.lastError)}` : ""}`,
    ]);
  }
  seen.set(receipt.receiptId, next);
  return { changed: true, lines };
}

/** @typedef {[number, string]} Line a line of the feed and the time it is stamped with */

/** Prints a look's lines by their time, whichever receipt or query they came from. */
function printInTimeOrder(/** @type {Line[]} */ lines) {
  for (const [at, line] of lines.sort((a, b) => a[0] - b[0])) console.log(`${clock(at)}  ${line}`);
  lines.length = 0;
}

const FINISHED = new Set(["processed", "stale", "skipped", "dead", "dismissed"]);

/**
 * When a receipt entered the status it has now, as far as the receipt says: a replay puts it back to pending at
 * its replay time (processed_at still holds the run before it), a finished status is stamped with processed_at
 * when that is after the last replay; otherwise (processing, or a finish not recorded yet) the time tail saw it.
 * @param {{ status: string, processedAt: number | null }} receipt
 * @param {number | null} replayedAt
 * @param {number} seenAt
 */
export function statusEnteredAt(receipt, replayedAt, seenAt) {
  if (receipt.status === "pending" && replayedAt !== null) return replayedAt;
  if (FINISHED.has(receipt.status) && receipt.processedAt !== null && receipt.processedAt >= (replayedAt ?? 0))
    return receipt.processedAt;
  return seenAt;
}
