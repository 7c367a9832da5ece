// `show <receipt-id>` or `show <source> <event-key>`: one receipt, its timeline and its outcome.
import { CliError, EXIT } from "../errors.mjs";
import { clock, dateTime, dim, duration, printable, status } from "../format.mjs";
import { adminRequest } from "../http.mjs";

const RECEIPT_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * @param {string} first a receipt id, or the source name
 * @param {string | undefined} eventKey
 * @param {{ json?: boolean, body?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function show(first, eventKey, options) {
  const path =
    eventKey === undefined && RECEIPT_ID.test(first)
      ? `/receipts/${first}`
      : `/sources/${encodeURIComponent(first)}/events/${encodeURIComponent(eventKey ?? "")}`;
  if (eventKey === undefined && !RECEIPT_ID.test(first)) {
    throw new CliError(
      `${first} is not a receipt id (26 characters): use show <receipt-id> or show <source> <event-key>`,
      EXIT.usage,
    );
  }
  /** @type {import("../../../src/admin/receipts/receipt-detail").ReceiptDetail} */
  const detail = await adminRequest(options, path);
  if (options.json) {
    console.log(JSON.stringify(detail, null, 2));
    return 0;
  }
  for (const line of describe(detail, Boolean(options.body))) console.log(line);
  return 0;
}

/**
 * The receipt as lines of text: identity, timeline (every hop and attempt in order), outcome.
 * @param {import("../../../src/admin/receipts/receipt-detail").ReceiptDetail} detail the admin API's receipt detail
 * @param {boolean} withBody
 */
export function describe(detail, withBody) {
  const receipt = detail.receipt;
  const lines = [
    `receipt   ${receipt.receiptId}`,
    `source    ${receipt.source}   event ${printable(receipt.eventKey)}${receipt.eventType ? `   type ${printable(receipt.eventType)}` : ""}`,
  ];
  if (receipt.subjectId || receipt.version !== null) {
    lines.push(
      `subject   ${receipt.subjectId === null || receipt.subjectId === undefined ? "—" : printable(receipt.subjectId)}${receipt.version !== null && receipt.version !== undefined ? `   version ${receipt.version}` : ""}`,
    );
  }
  // attempts counts every attempt ever; since the last replay is the API's figure too (src/db/receipt-runs.ts).
  const sinceReplay =
    receipt.attemptsSinceReplay !== null && receipt.attemptsSinceReplay !== undefined
      ? ` (${receipt.attemptsSinceReplay} since the last replay)`
      : "";
  lines.push(
    `status    ${status(receipt.status)}   provenance ${receipt.provenance}   attempts ${receipt.attempts}${sinceReplay}`,
    "",
    "timeline",
  );
  /** @type {[number, string][]} */
  const events = [];
  if (receipt.occurredAt) events.push([receipt.occurredAt, "occurred (provider's time)"]);
  events.push([receipt.receivedAt, "received and acknowledged"]);
  if (receipt.relayedAt) events.push([receipt.relayedAt, "recorded in D1, queued"]);
  for (const replay of detail.replays ?? []) {
    const how = [
      replay.previousStatus && `was ${replay.previousStatus}`,
      replay.requestedBy && `via ${replay.requestedBy}`,
    ]
      .filter(Boolean)
      .join(", ");
    const took =
      replay.durationMs !== null && replay.durationMs !== undefined
        ? `, finished in ${duration(replay.durationMs)}`
        : "";
    events.push([
      replay.replayedAt,
      `replay ${replay.replayNumber} of ${receipt.replayCount}: queued again${how ? ` (${how})` : ""}${took}`,
    ]);
  }
  for (const attempt of detail.attempts ?? []) {
    const outcome = `${status(attempt.outcome ?? "running")}${attempt.httpStatus ? ` HTTP ${attempt.httpStatus}` : ""}${attempt.durationMs !== null && attempt.durationMs !== undefined ? ` in ${duration(attempt.durationMs)}` : ""}`;
    events.push([
      attempt.startedAt,
      `attempt ${attempt.attemptNumber}: ${outcome}${attempt.error ? ` — ${printable(attempt.error)}` : ""}`,
    ]);
  }
  if (receipt.processedAt)
    events.push([receipt.processedAt, `finished: ${status(receipt.status === "dismissed" ? "dead" : receipt.status)}`]);
  // The latest dismissal and the latest restore (a restore keeps the dismissal's time); how to undo only while it stands.
  const undo =
    receipt.status === "dismissed"
      ? ` (restore: npm run cli -- restore ${receipt.receiptId}, or the dashboard's dead letters)`
      : "";
  if (receipt.dismissedAt)
    events.push([receipt.dismissedAt, `dismissed by an operator: out of the dead letters${undo}`]);
  if (receipt.restoredAt) events.push([receipt.restoredAt, "restored by an operator: a dead letter again, replayable"]);
  events.sort((a, b) => a[0] - b[0]);
  for (const [at, what] of events) lines.push(`  ${dateTime(at)}  ${what}`);
  if (receipt.nextAttemptAt && (receipt.status === "pending" || receipt.status === "processing")) {
    lines.push(`  ${dateTime(receipt.nextAttemptAt)}  ${dim("next attempt due")}`);
  }
  lines.push("", `outcome   ${outcomeSentence(receipt)}`);
  // A source with several routes: each route's delivery and its own outcome (docs/routing.md, "Fan-out").
  const routes = detail.routes ?? [];
  if (routes.length > 1 || routes.some((/** @type {any} */ route) => route.route !== null)) {
    lines.push("", `routes    ${status(detail.summary ?? receipt.status)} across ${routes.length}`);
    for (const route of routes) {
      const tries = route.status === "filtered out" ? "" : `   attempts ${route.attempts}`;
      const why = route.lastError ? ` — ${printable(route.lastError)}` : "";
      lines.push(
        `  ${printable(route.route ?? "(first)")}: ${route.status === "filtered out" ? dim("filtered out") : status(route.status)}${tries}${why}`,
      );
    }
  }
  // The first run's: a replay's own run is reported with its replay in the timeline.
  const firstFinish =
    receipt.receivedToFinishedMs === null || receipt.receivedToFinishedMs === undefined
      ? null
      : receipt.receivedAt + receipt.receivedToFinishedMs;
  if (firstFinish !== null)
    lines.push(
      dim(
        `          received → finished in ${duration(firstFinish - receipt.receivedAt)} (${clock(receipt.receivedAt)} → ${clock(firstFinish)})`,
      ),
    );
  for (const copy of detail.quarantine ?? []) {
    lines.push(
      `quarantined copy ${copy.quarantineId}: ${copy.reason} at ${dateTime(copy.receivedAt)} (same key, different bytes; never processed)`,
    );
  }
  if (receipt.keptHeaders && Object.keys(receipt.keptHeaders).length > 0) {
    lines.push("", "kept headers");
    for (const [name, value] of Object.entries(receipt.keptHeaders))
      lines.push(`  ${printable(name)}: ${printable(value)}`);
  }
  if (withBody) lines.push("", "body", receipt.body === null ? "  (past payload retention)" : prettyBody(receipt.body));
  else
    lines.push("", dim(receipt.body === null ? "body: past payload retention" : "body: kept (add --body to print it)"));
  return lines;
}

/** @param {import("../../../src/admin/receipts/receipt-detail").ReceiptDetail["receipt"]} receipt */
function outcomeSentence(receipt) {
  switch (receipt.status) {
    case "processed":
      return `${status("processed")}: applied once${receipt.provenance === "replayed" ? " (after a replay)" : ""}`;
    case "dead":
      return `${status("dead")}: ${receipt.lastError ? printable(receipt.lastError) : "gave up"} — fix the cause, then npm run cli -- replay ${receipt.receiptId}`;
    case "stale":
      return `${status("stale")}: an equal or newer version was already applied${receipt.staleAgainstVersion !== null && receipt.staleAgainstVersion !== undefined ? ` (version ${receipt.staleAgainstVersion})` : ""}`;
    case "skipped":
      return `${status("skipped")}: nothing to do for this event${receipt.lastError ? ` (${printable(receipt.lastError)})` : ""}`;
    case "dismissed":
      return `${status("dismissed")}: a dead letter set aside by an operator${receipt.lastError ? ` (${printable(receipt.lastError)})` : ""}`;
    case "pending":
    case "processing":
      return `${status(receipt.status)}: not finished yet${receipt.lastError ? `; last error: ${printable(receipt.lastError)}` : ""}`;
    default:
      return status(receipt.status);
  }
}

/** @param {{ encoding: "utf8" | "base64", text: string }} body as the API shows it: text, or base64 when not UTF-8 */
function prettyBody(body) {
  if (body.encoding === "base64") return `(binary, base64) ${body.text}`;
  try {
    // JSON.stringify escapes control characters inside strings; the bidirectional overrides it leaves as they are.
    return printable(JSON.stringify(JSON.parse(body.text), null, 2), { multiline: true });
  } catch {
    return printable(body.text, { multiline: true });
  }
}
