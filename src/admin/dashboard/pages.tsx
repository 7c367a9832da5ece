import type { ReceiptFilter } from "../filters";
import { PROVENANCES, RECEIPT_STATUSES } from "../filters";
import type { listAlerts, listQuarantine, ReceiptDetail, ReceiptSummary } from "../queries";
import type { SourcesHealth } from "../../sources/registry";
import type { Percentiles, StatsReport } from "../stats";
import { Badge, formatDuration, formatInstant, Page } from "./layout";

type Alerts = Awaited<ReturnType<typeof listAlerts>>;
type QuarantinePage = Awaited<ReturnType<typeof listQuarantine>>;

export function LoginPage(props: { problem?: string }) {
  return (
    <Page title="Sign in" signedIn={false}>
      <form class="login" method="post" action="/admin/login">
        <h1>Sign in</h1>
        {props.problem && <p class="error">{props.problem}</p>}
        <label for="token">Admin token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
        <p class="muted">The ADMIN_TOKEN Worker secret. It is exchanged for a session cookie and never put in a URL.</p>
      </form>
    </Page>
  );
}

export function ProblemPage(props: { status: number; message: string }) {
  return (
    <Page title="Problem">
      <h1>{props.status === 404 ? "Not found" : "Request not understood"}</h1>
      <p class="error">{props.message}</p>
    </Page>
  );
}

function latency(value: Percentiles) {
  return value.samples === 0 ? "—" : `${formatDuration(value.p50)} / ${formatDuration(value.p95)} / ${formatDuration(value.p99)}`;
}

/** Broken source tables, each with its problems: those sources answer 503 until the table is fixed. */
function ConfigProblems(props: { config: SourcesHealth }) {
  const { unreadable, invalid } = props.config;
  if (unreadable) {
    return (
      <div class="error" id="config-problems">
        <p>The SOURCES configuration cannot be read: every source answers 503 until it is fixed.</p>
        <ProblemList problems={unreadable} />
      </div>
    );
  }
  const broken = Object.entries(invalid);
  if (broken.length === 0) return null;
  return (
    <div class="error" id="config-problems">
      <p>
        {broken.length === 1 ? "One source's configuration is invalid" : `${broken.length} sources' configurations are invalid`}: each
        answers 503 (its sender retries) until its table is fixed and redeployed. Every other source keeps accepting.
      </p>
      {broken.map(([name, problems]) => (
        <div data-invalid-source={name}>
          <strong>{name}</strong>
          <ProblemList problems={problems} />
        </div>
      ))}
    </div>
  );
}

function ProblemList(props: { problems: string[] }) {
  return (
    <ul>
      {props.problems.map((problem) => (
        <li>{problem}</li>
      ))}
    </ul>
  );
}

function ConfigNote(props: { configured: boolean; problems: string[] | undefined }) {
  if (props.problems) return <span class="muted"> (configuration invalid)</span>;
  return props.configured ? null : <span class="muted"> (no longer configured)</span>;
}

export function OverviewPage(props: { report: StatsReport; alerts: Alerts; config: SourcesHealth }) {
  const { report } = props;
  return (
    <Page title="Sources" current="/admin">
      <h1>Sources</h1>
      <ConfigProblems config={props.config} />
      <p class="muted">
        Last {formatDuration(report.windowMs)} (since {formatInstant(report.since)}). Latencies are p50 / p95 / p99.
      </p>
      <table id="sources">
        <thead>
          <tr>
            <th>Source</th>
            <th>Health</th>
            <th class="num">Received</th>
            <th class="num">Processed</th>
            <th class="num">Stale</th>
            <th class="num">Pending</th>
            <th class="num">Dead (all time)</th>
            <th class="num">Quarantined</th>
            <th>Oldest pending</th>
            <th>Pickup latency</th>
            <th>Processing latency</th>
          </tr>
        </thead>
        <tbody>
          {report.sources.map((source) => (
            <tr data-source={source.source}>
              <td>
                <a href={`/admin/sources/${encodeURIComponent(source.source)}`}>{source.source}</a>
                <ConfigNote configured={source.configured} problems={props.config.invalid[source.source]} />
              </td>
              <td>
                <Badge value={source.health} />
              </td>
              <td class="num">{source.received}</td>
              <td class="num">{source.processed}</td>
              <td class="num">{source.stale}</td>
              <td class="num">{source.pending}</td>
              <td class="num">
                {source.deadTotal > 0 ? <a href={`/admin/dead?source=${encodeURIComponent(source.source)}`}>{source.deadTotal}</a> : 0}
              </td>
              <td class="num">{source.quarantined}</td>
              <td>{source.oldestPendingAgeMs === null ? "—" : `${formatDuration(source.oldestPendingAgeMs)} ago`}</td>
              <td>{latency(source.pickupLatencyMs)}</td>
              <td>{latency(source.processingLatencyMs)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted">
        Rejected signatures and acknowledgement latency are not stored (a rejected delivery writes nothing): see the
        <code> delivery.rejected</code> and <code>delivery</code> lines in Workers Logs.
      </p>
      <h2>Open alerts</h2>
      <AlertsTable alerts={props.alerts} />
    </Page>
  );
}

function Card(props: { label: string; value: string | number; id?: string }) {
  return (
    <div class="card" id={props.id}>
      <div class="muted">{props.label}</div>
      <div class="value">{props.value}</div>
    </div>
  );
}

export function SourcePage(props: { name: string; report: StatsReport; alerts: Alerts; problems: string[] | undefined }) {
  const name = encodeURIComponent(props.name);
  return (
    <Page title={props.name} current="/admin">
      <h1>
        {props.name} {props.report.sources[0] && <Badge value={props.report.sources[0].health} />}
      </h1>
      {props.problems && (
        <div class="error" id="config-problems">
          <p>This source's configuration is invalid: its deliveries answer 503 (the sender retries) until the table is fixed and redeployed.</p>
          <ProblemList problems={props.problems} />
        </div>
      )}
      <p class="muted">
        Last {formatDuration(props.report.windowMs)} · <a href={`/admin/receipts?source=${name}`}>receipts</a> ·{" "}
        <a href={`/admin/dead?source=${name}`}>dead letters</a>
      </p>
      {props.report.sources[0] ? <SourceNumbers source={props.report.sources[0]} /> : <p class="muted">Nothing recorded for this source yet.</p>}
      <h2>Alerts</h2>
      <AlertsTable alerts={props.alerts} />
    </Page>
  );
}

function SourceNumbers(props: { source: StatsReport["sources"][number] }) {
  const { source } = props;
  return (
    <>
      <div class="cards">
        <Card label="Received" value={source.received} id="received" />
        <Card label="Duplicates (live)" value={source.duplicates ?? "—"} id="duplicates" />
        <Card label="Quarantined" value={source.quarantined} />
        <Card label="Processed" value={source.processed} />
        <Card label="Stale" value={source.stale} />
        <Card label="Skipped" value={source.skipped} />
        <Card label="Pending" value={source.pending} />
        <Card label="Dead (window / all time)" value={`${source.dead} / ${source.deadTotal}`} />
        <Card label="Reconciled" value={source.reconciled} />
        <Card label="Replayed" value={source.replayed} />
        <Card label="Oldest pending" value={source.oldestPendingAgeMs === null ? "—" : `${formatDuration(source.oldestPendingAgeMs)} ago`} />
        <Card label="Rejected signatures" value="in Workers Logs" />
      </div>
      <table>
        <thead>
          <tr>
            <th>Latency</th>
            <th class="num">Samples</th>
            <th class="num">p50</th>
            <th class="num">p95</th>
            <th class="num">p99</th>
            <th class="num">Max</th>
          </tr>
        </thead>
        <tbody>
          {(
            [
              ["Pickup (received → first attempt)", source.pickupLatencyMs],
              ["Processing (received → finished)", source.processingLatencyMs],
              ["Attempt duration", source.attemptDurationMs],
            ] as const
          ).map(([label, value]) => (
            <tr>
              <td>{label}</td>
              <td class="num">{value.samples}</td>
              <td class="num">{formatDuration(value.p50)}</td>
              <td class="num">{formatDuration(value.p95)}</td>
              <td class="num">{formatDuration(value.p99)}</td>
              <td class="num">{formatDuration(value.max)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted">Acknowledgement latency is the durationMs of each delivery log line (Workers Logs); it is not stored.</p>
    </>
  );
}

export function AlertsTable(props: { alerts: Alerts }) {
  if (props.alerts.length === 0) return <p class="muted">None.</p>;
  return (
    <table id="alerts">
      <thead>
        <tr>
          <th>Opened</th>
          <th>Source</th>
          <th>Kind</th>
          <th>State</th>
          <th>Detail</th>
          <th>Resolved</th>
        </tr>
      </thead>
      <tbody>
        {props.alerts.map((alert) => (
          <tr>
            <td>{formatInstant(alert.openedAt)}</td>
            <td>{alert.source ?? "—"}</td>
            <td>{alert.kind}</td>
            <td>
              <Badge value={alert.state} />
            </td>
            <td>{alert.detail ?? ""}</td>
            <td>{formatInstant(alert.resolvedAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function AlertsPage(props: { alerts: Alerts }) {
  return (
    <Page title="Alerts" current="/admin/alerts">
      <h1>Alerts</h1>
      <AlertsTable alerts={props.alerts} />
    </Page>
  );
}

function pageLink(base: string, query: Record<string, string | undefined>, before: string) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value && name !== "before") params.set(name, value);
  params.set("before", before);
  return `${base}?${params}`;
}

function ReceiptsTable(props: { receipts: ReceiptSummary[]; selectable?: boolean }) {
  if (props.receipts.length === 0) return <p class="muted">No receipts match.</p>;
  return (
    <table id="receipts">
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
          <th>Last error</th>
        </tr>
      </thead>
      <tbody>
        {props.receipts.map((receipt) => (
          <tr data-receipt={receipt.receiptId}>
            {props.selectable && (
              <td>
                <input type="checkbox" name="receiptId" value={receipt.receiptId} aria-label={`select ${receipt.eventKey}`} />
              </td>
            )}
            <td>
              <a href={`/admin/receipts/${receipt.receiptId}`}>{formatInstant(receipt.receivedAt)}</a>
            </td>
            <td>{receipt.source}</td>
            <td class="mono">{receipt.eventKey}</td>
            <td>{receipt.eventType ?? "—"}</td>
            <td class="mono">{receipt.subjectId ?? "—"}</td>
            <td>
              <Badge value={receipt.status} />
            </td>
            <td class="num">{receipt.attempts}</td>
            <td>{receipt.provenance}</td>
            <td class="muted">{receipt.lastError ?? ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ReceiptsPage(props: { query: Record<string, string | undefined>; filter: ReceiptFilter; receipts: ReceiptSummary[]; nextCursor: string | null }) {
  const { query } = props;
  return (
    <Page title="Receipts" current="/admin/receipts">
      <h1>Receipts</h1>
      <form class="filters" method="get" action="/admin/receipts">
        <label>
          Source
          <input name="source" value={query.source ?? ""} />
        </label>
        <label>
          Status
          <select name="status">
            <option value="">any</option>
            {RECEIPT_STATUSES.map((status) => (
              <option value={status} selected={query.status === status}>
                {status}
              </option>
            ))}
          </select>
        </label>
        <label>
          Type
          <input name="type" value={query.type ?? ""} />
        </label>
        <label>
          Event key
          <input name="eventKey" value={query.eventKey ?? ""} />
        </label>
        <label>
          Subject
          <input name="subject" value={query.subject ?? ""} />
        </label>
        <label>
          Provenance
          <select name="provenance">
            <option value="">any</option>
            {PROVENANCES.map((provenance) => (
              <option value={provenance} selected={query.provenance === provenance}>
                {provenance}
              </option>
            ))}
          </select>
        </label>
        <label>
          Since (ISO or ms)
          <input name="since" value={query.since ?? ""} />
        </label>
        <label>
          Until
          <input name="until" value={query.until ?? ""} />
        </label>
        <button type="submit">Filter</button>
        <a href="/admin/receipts">clear</a>
      </form>
      <ReceiptsTable receipts={props.receipts} />
      {props.nextCursor && (
        <p>
          <a id="next-page" href={pageLink("/admin/receipts", query, props.nextCursor)}>
            Older →
          </a>
        </p>
      )}
    </Page>
  );
}

export function DeadLettersPage(props: { query: Record<string, string | undefined>; receipts: ReceiptSummary[]; nextCursor: string | null; flash?: string }) {
  return (
    <Page title="Dead letters" current="/admin/dead">
      <h1>Dead letters</h1>
      {props.flash && <p class="flash">{props.flash}</p>}
      <form method="post" action="/admin/dead/replay">
        <p>
          <button type="submit" name="scope" value="selected">
            Replay selected
          </button>{" "}
          <button type="submit" name="scope" value="page" class="secondary">
            Replay all on this page
          </button>
        </p>
        {props.receipts.map((receipt) => (
          <input type="hidden" name="pageReceiptId" value={receipt.receiptId} />
        ))}
        <ReceiptsTable receipts={props.receipts} selectable />
      </form>
      {props.nextCursor && (
        <p>
          <a href={pageLink("/admin/dead", props.query, props.nextCursor)}>Older →</a>
        </p>
      )}
    </Page>
  );
}

export function QuarantinePage(props: { page: QuarantinePage }) {
  return (
    <Page title="Quarantine" current="/admin/quarantine">
      <h1>Quarantine</h1>
      <p class="muted">Deliveries that reused an event key with different bytes. They are kept for a human and never processed.</p>
      {props.page.quarantine.length === 0 ? (
        <p class="muted">Nothing quarantined.</p>
      ) : (
        <table id="quarantine">
          <thead>
            <tr>
              <th>Received</th>
              <th>Source</th>
              <th>Event key</th>
              <th>Reason</th>
              <th>Original receipt</th>
              <th>Payload SHA-256</th>
            </tr>
          </thead>
          <tbody>
            {props.page.quarantine.map((record) => (
              <tr>
                <td>{formatInstant(record.receivedAt)}</td>
                <td>{record.source}</td>
                <td class="mono">{record.eventKey}</td>
                <td>{record.reason}</td>
                <td>{record.originalReceiptId ? <a href={`/admin/receipts/${record.originalReceiptId}`}>{record.originalReceiptId}</a> : "—"}</td>
                <td class="mono">{record.payloadSha256.slice(0, 16)}…</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}

type TimelineEntry = { at: number; label: string; state: string; detail?: string };

function timeline(detail: ReceiptDetail): TimelineEntry[] {
  const { receipt } = detail;
  const received = receipt.provenance === "reconciled" ? "Found by reconciliation" : "Received";
  const entries: TimelineEntry[] = [{ at: receipt.receivedAt, label: received, state: "ok" }];
  if (receipt.relayedAt !== null) entries.push({ at: receipt.relayedAt, label: "Relayed to D1", state: "ok" });
  // A replay resets enqueued_at, so for a replayed receipt this is the moment of the (latest) replay.
  if (receipt.enqueuedAt !== null) {
    entries.push({ at: receipt.enqueuedAt, label: receipt.provenance === "replayed" ? "Replayed: enqueued again" : "Enqueued", state: "ok" });
  }
  for (const attempt of detail.attempts) {
    const parts = [
      attempt.durationMs !== null ? formatDuration(attempt.durationMs) : "unfinished",
      attempt.httpStatus !== null ? `HTTP ${attempt.httpStatus}` : null,
      attempt.error,
    ].filter(Boolean);
    entries.push({ at: attempt.startedAt, label: `Attempt ${attempt.attemptNumber}: ${attempt.outcome ?? "running"}`, state: attempt.outcome ?? "", detail: parts.join(" · ") });
  }
  if (receipt.processedAt !== null) entries.push({ at: receipt.processedAt, label: `Finished: ${receipt.status}`, state: receipt.status });
  if (receipt.status === "dead") entries.push({ at: detail.attempts.at(-1)?.finishedAt ?? receipt.receivedAt, label: "Dead", state: "dead", detail: receipt.lastError ?? undefined });
  if (receipt.status === "pending" && receipt.nextAttemptAt !== null) {
    entries.push({ at: receipt.nextAttemptAt, label: "Next attempt due", state: "retry" });
  }
  // Stable sort: entries at the same millisecond keep the pipeline's order.
  return entries.sort((a, b) => a.at - b.at);
}

export function ReceiptPage(props: { detail: ReceiptDetail; flash?: string }) {
  const { receipt } = props.detail;
  return (
    <Page title={`Receipt ${receipt.receiptId}`} current="/admin/receipts">
      <h1>
        Receipt <span class="mono">{receipt.receiptId}</span> <Badge value={receipt.status} />
      </h1>
      {props.flash && <p class="flash">{props.flash}</p>}
      <dl class="facts">
        <dt>Source</dt>
        <dd>{receipt.source}</dd>
        <dt>Event key</dt>
        <dd class="mono">{receipt.eventKey}</dd>
        <dt>Type</dt>
        <dd>{receipt.eventType ?? "—"}</dd>
        <dt>Subject</dt>
        <dd class="mono">{receipt.subjectId ?? "—"}</dd>
        <dt>Version</dt>
        <dd>{receipt.version ?? "—"}{receipt.staleAgainstVersion !== null && ` (stale against ${receipt.staleAgainstVersion})`}</dd>
        <dt>Provenance</dt>
        <dd>{receipt.provenance}</dd>
        <dt>Payload SHA-256</dt>
        <dd class="mono">{receipt.payloadSha256}</dd>
        <dt>Last error</dt>
        <dd>{receipt.lastError ?? "—"}</dd>
      </dl>
      {["dead", "processed", "stale", "skipped"].includes(receipt.status) && receipt.bodyRetained && (
        <form method="post" action={`/admin/receipts/${receipt.receiptId}/replay`}>
          <p>
            <button type="submit" id="replay">
              {receipt.status === "dead" ? "Replay this dead letter" : "Replay this receipt"}
            </button>
          </p>
        </form>
      )}
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
              </p>
              {record.body && <pre>{record.body.text}</pre>}
            </div>
          ))}
        </>
      )}
      <h2>Kept headers</h2>
      {receipt.keptHeaders ? <pre id="headers">{JSON.stringify(receipt.keptHeaders, null, 2)}</pre> : <p class="muted">None kept.</p>}
      <h2>Body</h2>
      {receipt.body ? (
        <pre id="body">{receipt.body.encoding === "utf8" ? receipt.body.text : `base64: ${receipt.body.text}`}</pre>
      ) : (
        <p class="muted">No longer retained (payload retention); the key and hash remain.</p>
      )}
    </Page>
  );
}
