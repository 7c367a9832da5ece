import type { Role } from "../../guards/actor";
import type { ReceiptDetail } from "../../receipts/receipt-detail";
import { Flash } from "../components";
import { formatDuration, formatInstant } from "../format";
import { Badge, Page } from "../layout";
import { RoleGate } from "../role-gate";

type TimelineEntry = { at: number; label: string; state: string; detail?: string };

const REQUESTED_BY: Record<string, string> = { api: "through the admin API", dashboard: "from the dashboard" };

/**
 * The life of one receipt in time order. Attempts of every run are listed (a replay starts a new run and the
 * attempt numbers carry on), and every replay is marked where it happened, from the `replays` log.
 */
export function timeline(detail: ReceiptDetail): TimelineEntry[] {
  const { receipt } = detail;
  const received = receipt.provenance === "reconciled" ? "Found by reconciliation" : "Received";
  const entries: TimelineEntry[] = [{ at: receipt.receivedAt, label: received, state: "ok" }];
  if (receipt.relayedAt !== null)
    entries.push({ at: receipt.relayedAt, label: "Relayed to D1 and enqueued", state: "ok" });
  for (const replay of detail.replays) {
    const label =
      receipt.replayCount === 1
        ? "Replayed: enqueued again"
        : `Replay ${replay.replayNumber} of ${receipt.replayCount}: enqueued again`;
    const parts = [
      replay.previousStatus && `was ${replay.previousStatus}`,
      replay.requestedBy && REQUESTED_BY[replay.requestedBy],
      replay.durationMs !== null && `its run finished in ${formatDuration(replay.durationMs)}`,
    ].filter(Boolean);
    entries.push({
      at: replay.replayedAt,
      label,
      state: "replay",
      detail: parts.length > 0 ? parts.join(", ") : undefined,
    });
  }
  for (const attempt of detail.attempts) {
    const parts = [
      attempt.durationMs !== null ? formatDuration(attempt.durationMs) : "unfinished",
      attempt.httpStatus !== null ? `HTTP ${attempt.httpStatus}` : null,
      attempt.error,
    ].filter(Boolean);
    entries.push({
      at: attempt.startedAt,
      label: `Attempt ${attempt.attemptNumber}: ${attempt.outcome ?? "running"}`,
      state: attempt.outcome ?? "",
      detail: parts.join(" · "),
    });
  }
  if (receipt.processedAt !== null && ["processed", "stale", "skipped"].includes(receipt.status)) {
    const reason =
      receipt.status === "skipped" || receipt.status === "stale" ? (receipt.lastError ?? undefined) : undefined;
    entries.push({
      at: receipt.processedAt,
      label: `Finished: ${receipt.status}`,
      state: receipt.status,
      detail: reason,
    });
  }
  if (receipt.status === "dead" || receipt.status === "dismissed") {
    entries.push({
      at: detail.attempts.at(-1)?.finishedAt ?? receipt.receivedAt,
      label: "Dead",
      state: "dead",
      detail: receipt.lastError ?? undefined,
    });
  }
  // The latest dismissal and the latest restore, each where it happened (a restore keeps the dismissal's time).
  if (receipt.dismissedAt !== null)
    entries.push({ at: receipt.dismissedAt, label: "Dismissed by an operator", state: "ok" });
  if (receipt.restoredAt !== null)
    entries.push({ at: receipt.restoredAt, label: "Restored by an operator: a dead letter again", state: "dead" });
  if (receipt.status === "pending" && receipt.nextAttemptAt !== null) {
    entries.push({ at: receipt.nextAttemptAt, label: "Next attempt due", state: "retry" });
  }
  // Stable sort: entries at the same millisecond keep the pipeline's order.
  return entries.sort((a, b) => a.at - b.at);
}

/** When retention drops the body: a dead letter's stays for its source's dead-letter retention, to be replayed. */
function BodyRetention(props: { receipt: ReceiptDetail["receipt"] }) {
  const { receipt } = props;
  if (receipt.bodyDropsAt === null) return null;
  const window = receipt.status === "dead" ? "dead-letter retention" : "payload retention";
  return (
    <p class="muted" id="body-drops-at">
      Kept until {formatInstant(receipt.bodyDropsAt)} ({window}
      {receipt.status === "dead" ? "; dismissing it hands the body back to payload retention" : ""}), then dropped by
      the next cron run.
    </p>
  );
}

/** Why a receipt offers no action: the heading alone, left empty after a replay, read as a page that broke. */
function noActionReason(receipt: ReceiptDetail["receipt"]): string {
  if (receipt.status === "pending" || receipt.status === "processing")
    return `None while it is ${receipt.status}: reload to see how it finishes.`;
  return "None: its body is no longer kept, so it cannot be replayed.";
}

function Actions(props: { receipt: ReceiptDetail["receipt"]; role: Role }) {
  const { receipt } = props;
  const replayable = ["dead", "processed", "stale", "skipped"].includes(receipt.status) && receipt.bodyRetained;
  if (!replayable && receipt.status !== "dead" && receipt.status !== "dismissed")
    return (
      <p class="muted" id="no-actions">
        {noActionReason(receipt)}
      </p>
    );
  const doing = receipt.status === "dismissed" ? "restore it" : replayable ? "replay it" : "dismiss it";
  return (
    <RoleGate role={props.role} needs="operator" doing={doing}>
      <div class="actions">
        {replayable && (
          <form method="post" action={`/admin/receipts/${receipt.receiptId}/replay`}>
            <button type="submit" id="replay">
              {receipt.status === "dead" ? "Replay this dead letter" : "Replay this receipt"}
            </button>
          </form>
        )}
        {receipt.status === "dead" && (
          <form method="post" action="/admin/dead/action">
            <input type="hidden" name="receiptId" value={receipt.receiptId} />
            <button type="submit" name="action" value="dismiss" class="danger" id="dismiss">
              Dismiss (cause fixed, no replay)
            </button>
          </form>
        )}
        {receipt.status === "dismissed" && (
          <form method="post" action="/admin/dead/action">
            <input type="hidden" name="receiptId" value={receipt.receiptId} />
            <button type="submit" name="action" value="restore" class="secondary" id="restore">
              Restore to dead letters
            </button>
          </form>
        )}
      </div>
    </RoleGate>
  );
}

export function ReceiptPage(props: { detail: ReceiptDetail; role: Role; flash?: string }) {
  const { receipt } = props.detail;
  return (
    <Page title={`Receipt ${receipt.receiptId}`} current="/admin/receipts">
      <h1>
        Receipt <span class="mono">{receipt.receiptId}</span> <Badge value={receipt.status} />
      </h1>
      <Flash message={props.flash} />
      <dl class="facts">
        <dt>Source</dt>
        <dd>
          <a href={`/admin/sources/${encodeURIComponent(receipt.source)}`}>{receipt.source}</a>
        </dd>
        <dt>Event key</dt>
        <dd class="mono">{receipt.eventKey}</dd>
        <dt>Type</dt>
        <dd>{receipt.eventType ?? "—"}</dd>
        <dt>Subject</dt>
        <dd class="mono">{receipt.subjectId ?? "—"}</dd>
        <dt>Version</dt>
        <dd>
          {receipt.version ?? "—"}
          {receipt.staleAgainstVersion !== null && ` (stale against ${receipt.staleAgainstVersion})`}
        </dd>
        <dt>Provenance</dt>
        <dd>{receipt.provenance}</dd>
        <dt>Attempts</dt>
        <dd id="attempts">
          {receipt.attempts}
          {receipt.attemptsSinceReplay !== null && ` (${receipt.attemptsSinceReplay} since the last replay)`}
        </dd>
        <dt>Received → finished</dt>
        <dd id="received-to-finished">{formatDuration(receipt.receivedToFinishedMs)}</dd>
        <dt>Replays</dt>
        <dd>
          {receipt.replayCount === 0
            ? "none"
            : `${receipt.replayCount}, the latest at ${formatInstant(receipt.replayedAt)}`}
        </dd>
        <dt>Payload SHA-256</dt>
        <dd class="mono">{receipt.payloadSha256}</dd>
        <dt>
          {receipt.status === "skipped" ? "Why skipped" : receipt.status === "stale" ? "Why stale" : "Last error"}
        </dt>
        <dd id="last-error">{receipt.lastError ?? "—"}</dd>
      </dl>
      {(props.detail.routes.length > 1 || props.detail.routes.some((route) => route.route !== null)) && (
        <>
          <h2>Routes</h2>
          <table id="routes">
            <thead>
              <tr>
                <th>Route</th>
                <th>Outcome</th>
                <th>Attempts</th>
                <th>Last error</th>
              </tr>
            </thead>
            <tbody>
              {props.detail.routes.map((route) => (
                <tr>
                  <td class="mono">{route.route ?? "(first)"}</td>
                  <td>{route.status}</td>
                  <td>{route.status === "filtered out" ? "—" : route.attempts}</td>
                  <td>{route.lastError ?? "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <h2>Actions</h2>
      <Actions receipt={receipt} role={props.role} />
      <h2>Timeline</h2>
      <ol class="timeline" id="timeline">
        {timeline(props.detail).map((entry) => (
          <li class={entry.state}>
            <strong>{entry.label}</strong> <span class="muted">{formatInstant(entry.at)}</span>
            {entry.detail && <div class="muted">{entry.detail}</div>}
          </li>
        ))}
      </ol>
      {props.detail.quarantine.length > 0 && (
        <>
          <h2>Quarantined copies</h2>
          {props.detail.quarantine.map((record) => (
            <div>
              <p>
                {formatInstant(record.receivedAt)} · {record.reason} · <span class="mono">{record.payloadSha256}</span>
                {record.copies > 1 && ` · ${record.copies} copies counted, the latest's hash shown, bodies not kept`}
              </p>
              {record.body && <pre>{record.body.text}</pre>}
            </div>
          ))}
        </>
      )}
      <h2>Kept headers</h2>
      {receipt.keptHeaders ? (
        <pre id="headers">{JSON.stringify(receipt.keptHeaders, null, 2)}</pre>
      ) : (
        <p class="muted">None kept.</p>
      )}
      <h2>Body</h2>
      <BodyRetention receipt={receipt} />
      {receipt.body ? (
        <pre id="body">{receipt.body.encoding === "utf8" ? receipt.body.text : `base64: ${receipt.body.text}`}</pre>
      ) : (
        <p class="muted">No longer retained (payload retention); the key and hash remain.</p>
      )}
    </Page>
  );
}
