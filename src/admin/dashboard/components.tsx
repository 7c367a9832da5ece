import type { ReadableAlert } from "../health/alerts";
import type { HealthReason } from "../health/source-health";
import type { ReceiptSummary } from "../receipts/receipt-slice";
import { formatFacts, formatInstant, withQuery } from "./format";
import { Badge } from "./layout";

/** Pieces more than one page uses. Tables carry `data-label` on each cell for the phone layout (see styles.ts). */

export function Card(props: { label: string; value: string | number; id?: string; href?: string }) {
  return (
    <div class="card" id={props.id}>
      <div class="muted">{props.label}</div>
      <div class="value">{props.href ? <a href={props.href}>{props.value}</a> : props.value}</div>
    </div>
  );
}

export function ProblemList(props: { problems: string[] }) {
  return (
    <ul>
      {props.problems.map((problem) => (
        <li>{problem}</li>
      ))}
    </ul>
  );
}

export function Flash(props: { message: string | undefined }) {
  return props.message ? <p class="flash">{props.message}</p> : null;
}

/** Links to the newer and older pages of a keyset-paged list, keeping every other query parameter. */
export function Pager(props: {
  path: string;
  query: Record<string, string | undefined>;
  prevCursor: string | null;
  nextCursor: string | null;
}) {
  if (!props.prevCursor && !props.nextCursor) return null;
  return (
    <p class="pager">
      {props.prevCursor && (
        <a id="prev-page" href={withQuery(props.path, props.query, { after: props.prevCursor }, ["before", "after"])}>
          ← Newer
        </a>
      )}
      {props.nextCursor && (
        <a id="next-page" href={withQuery(props.path, props.query, { before: props.nextCursor }, ["before", "after"])}>
          Older →
        </a>
      )}
    </p>
  );
}

/** Where each reason for a source's health is explained in full. */
export function reasonLink(source: string, reason: HealthReason): { href: string; label: string } {
  const name = encodeURIComponent(source);
  switch (reason.reason) {
    case "dead-letters":
      return { href: `/admin/dead?source=${name}`, label: "see the dead letters" };
    case "open-alerts":
      return { href: `/admin/alerts?source=${name}&state=open`, label: "see the alerts" };
    case "config-invalid":
      return { href: `/admin/sources/${name}#config-problems`, label: "see the problems" };
    case "backlog":
      return { href: `/admin/receipts?source=${name}&status=pending,processing`, label: "see what is waiting" };
  }
}

export function HealthReasons(props: { source: string; reasons: HealthReason[]; id?: string }) {
  if (props.reasons.length === 0) return null;
  return (
    <ul class="reasons" id={props.id}>
      {props.reasons.map((reason) => {
        const link = reasonLink(props.source, reason);
        return (
          <li class={reason.reason === "backlog" ? "backlog" : undefined} data-reason={reason.reason}>
            {reason.message} <a href={link.href}>{link.label}</a>
          </li>
        );
      })}
    </ul>
  );
}

/** What an alert is about, as a link to where to look. */
export function alertConcerns(alert: ReadableAlert): { href: string; label: string } | null {
  if (alert.source === null) return null;
  const name = encodeURIComponent(alert.source);
  switch (alert.kind) {
    case "dead-letters":
      return { href: `/admin/dead?source=${name}`, label: `${alert.source}'s dead letters` };
    case "pending-age":
      return {
        href: `/admin/receipts?source=${name}&status=pending,processing`,
        label: `${alert.source}'s waiting receipts`,
      };
    case "catch-up-missing":
      return {
        href: `/admin/receipts?source=${name}&provenance=reconciled`,
        label: `${alert.source}'s reconciled events`,
      };
    default:
      return { href: `/admin/sources/${name}`, label: alert.source };
  }
}

const ALERT_KINDS: Record<string, string> = {
  silence: "Silence",
  "dead-letters": "Dead letters",
  "pending-age": "Backlog",
  "catch-up-missing": "Missed deliveries",
};

export function AlertsTable(props: { alerts: ReadableAlert[] }) {
  if (props.alerts.length === 0) return <p class="muted">None.</p>;
  return (
    <table id="alerts" class="rows">
      <thead>
        <tr>
          <th>Opened</th>
          <th>Alert</th>
          <th>State</th>
          <th>What happened</th>
          <th>Concerns</th>
          <th>Resolved</th>
        </tr>
      </thead>
      <tbody>
        {props.alerts.map((alert) => {
          const concerns = alertConcerns(alert);
          return (
            <tr data-alert={alert.alertId}>
              <td data-label="Opened">{formatInstant(alert.openedAt)}</td>
              <td data-label="Alert">{ALERT_KINDS[alert.kind] ?? alert.kind}</td>
              <td data-label="State">
                <Badge value={alert.state} />
              </td>
              <td data-label="What happened">
                <span class="alert-message">{alert.message ?? "—"}</span>
                {alert.facts && <div class="muted alert-facts">{formatFacts(alert.facts)}</div>}
              </td>
              <td data-label="Concerns">{concerns ? <a href={concerns.href}>{concerns.label}</a> : "every source"}</td>
              <td data-label="Resolved">{alert.state === "resolved" ? formatInstant(alert.resolvedAt) : "—"}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

export function ReceiptsTable(props: { receipts: ReceiptSummary[]; selectable?: boolean }) {
  if (props.receipts.length === 0) return <p class="muted">No receipts match.</p>;
  return (
    <table id="receipts" class="rows">
      <thead>
        <tr>
          {props.selectable && <th />}
          <th>Received</th>
          <th>Source</th>
          <th>Event key</th>
          <th>Type</th>
          <th>Subject</th>
          <th>Status</th>
          <th class="num">Attempts</th>
          <th>Provenance</th>
          <th>Error or reason</th>
        </tr>
      </thead>
      <tbody>
        {props.receipts.map((receipt) => (
          <tr data-receipt={receipt.receiptId}>
            {props.selectable && (
              <td data-label="Select">
                <input
                  type="checkbox"
                  name="receiptId"
                  value={receipt.receiptId}
                  aria-label={`select ${receipt.eventKey}`}
                />
              </td>
            )}
            <td data-label="Received">
              <a href={`/admin/receipts/${receipt.receiptId}`}>{formatInstant(receipt.receivedAt)}</a>
            </td>
            <td data-label="Source">{receipt.source}</td>
            <td data-label="Event key" class="mono">
              {receipt.eventKey}
            </td>
            <td data-label="Type">{receipt.eventType ?? "—"}</td>
            <td data-label="Subject" class="mono">
              {receipt.subjectId ?? "—"}
            </td>
            <td data-label="Status">
              <Badge value={receipt.status} />
            </td>
            <td data-label="Attempts" class="num">
              {receipt.attempts}
            </td>
            <td data-label="Provenance">
              <span>
                {receipt.provenance}
                {receipt.replayCount > 0 && <span class="muted"> · replayed ×{receipt.replayCount}</span>}
              </span>
            </td>
            <td data-label="Error or reason" class="muted">
              {receipt.lastError ?? ""}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
