import type { RouteControlView } from "../../actions/route-control";
import type { Role } from "../../guards/actor";
import type { ReadableAlert } from "../../health/alerts";
import type { VerificationReport } from "../../health/verification-report";
import type { HourPoint } from "../../stats/series";
import type { SourceStats, StatsReport } from "../../stats/stats";
import { HourlyBars, HourlyLatency } from "../charts";
import { AlertsTable, Card, Flash, HealthReasons, ProblemList } from "../components";
import { formatDuration } from "../format";
import { Badge, Page } from "../layout";
import { OriginNote } from "./overview";
import { RouteControlPanel } from "./route-control";
import { VerificationPanel } from "./verification";

/** One source: why its health is what it is, its last 24 hours as charts, its numbers, its alerts. */
export function SourcePage(props: {
  name: string;
  report: StatsReport;
  points: HourPoint[];
  alerts: ReadableAlert[];
  problems: string[] | undefined;
  routes?: readonly RouteControlView[];
  /** Absent for a source that is not configured (only recorded): it has no secrets to show. */
  verification?: VerificationReport;
  now?: number;
  flash?: string;
  /** The signed-in role: the pause and resume forms are an operator's. */
  role: Role;
}) {
  const name = encodeURIComponent(props.name);
  const source = props.report.sources[0];
  return (
    <Page title={props.name} current="/admin">
      <h1>
        {props.name} {source && <Badge value={source.health} />}
      </h1>
      <Flash message={props.flash} />
      {props.problems && (
        <div class="error" id="config-problems">
          <p>
            This source's configuration is invalid: its deliveries answer 503 (the sender retries) until the table is
            fixed and redeployed.
          </p>
          <ProblemList problems={props.problems} />
        </div>
      )}
      {source && source.healthReasons.length > 0 && (
        <>
          <h2>Why it is {source.health}</h2>
          <HealthReasons source={props.name} reasons={source.healthReasons} id="health-reasons" />
        </>
      )}
      <p class="muted">
        Last {formatDuration(props.report.windowMs)} · <a href={`/admin/receipts?source=${name}`}>receipts</a> ·{" "}
        <a href={`/admin/dead?source=${name}`}>dead letters</a> · <a href={`/admin/alerts?source=${name}`}>alerts</a>
      </p>
      {props.routes?.map((view) => (
        <RouteControlPanel view={view} role={props.role} />
      ))}
      <h2>Last 24 hours, per hour (UTC)</h2>
      <Charts points={props.points} rejectedFrom={props.report.origins.rejectedSignatures} />
      {source ? (
        <SourceNumbers source={source} name={name} />
      ) : (
        <p class="muted">Nothing recorded for this source yet.</p>
      )}
      <OriginNote report={props.report} />
      {props.verification && <VerificationPanel report={props.verification} now={props.now ?? Date.now()} />}
      <h2>Alerts</h2>
      <AlertsTable alerts={props.alerts} />
    </Page>
  );
}

function Charts(props: { points: HourPoint[]; rejectedFrom: string | undefined }) {
  const notStored =
    "Not stored in D1: a rejected delivery writes nothing. Bind the METRICS Analytics Engine dataset and set METRICS_ACCOUNT_ID and METRICS_API_TOKEN to chart it (docs/metrics.md).";
  return (
    <div class="charts" id="charts">
      <HourlyBars
        id="chart-received"
        title="Received"
        points={props.points}
        value={(point) => point.received}
        tone="ink"
      />
      <HourlyBars
        id="chart-processed"
        title="Processed"
        points={props.points}
        value={(point) => point.processed}
        tone="ok"
      />
      <HourlyBars id="chart-dead" title="Dead" points={props.points} value={(point) => point.dead} tone="bad" />
      <HourlyBars
        id="chart-rejected"
        title="Rejected"
        points={props.points}
        value={(point) => point.rejected}
        tone="warn"
        note={
          props.rejectedFrom === "analytics-engine"
            ? "From Analytics Engine."
            : props.rejectedFrom === "dev-server-memory"
              ? "Counted by this dev server since it started (wrangler dev keeps no Analytics Engine data to read back)."
              : notStored
        }
      />
      <HourlyLatency
        id="chart-pickup"
        title="Pickup latency"
        points={props.points}
        p50={(point) => point.pickupP50}
        p95={(point) => point.pickupP95}
        note="Received → first attempt started, by the hour received."
      />
      <HourlyLatency
        id="chart-processing"
        title="Processing time"
        points={props.points}
        p50={(point) => point.processingP50}
        p95={(point) => point.processingP95}
        note="The attempt that finished each receipt, by the hour received."
      />
      {props.rejectedFrom === "analytics-engine" && (
        <HourlyLatency
          id="chart-ack"
          title="Acknowledgement latency"
          points={props.points}
          p50={(point) => point.ackP50}
          p95={(point) => point.ackP95}
          note="From Analytics Engine."
        />
      )}
    </div>
  );
}

function SourceNumbers(props: { source: SourceStats; name: string }) {
  const { source, name } = props;
  return (
    <>
      <div class="cards">
        <Card label="Received" value={source.received} id="received" />
        <Card label="Duplicates (live)" value={source.duplicates ?? "—"} id="duplicates" />
        <Card label="Quarantined" value={source.quarantined} href={`/admin/quarantine?source=${name}`} />
        <Card label="Processed" value={source.processed} />
        <Card label="Stale" value={source.stale} />
        <Card
          label="Skipped"
          value={source.skipped}
          id="skipped"
          href={`/admin/receipts?source=${name}&status=skipped`}
        />
        <Card label="Pending" value={source.pending} />
        <Card
          label="Dead (window / all time)"
          value={`${source.dead} / ${source.deadTotal}`}
          id="dead"
          href={`/admin/dead?source=${name}`}
        />
        <Card label="Dismissed" value={source.dismissed} href={`/admin/dead?source=${name}&show=dismissed`} />
        <Card label="Reconciled" value={source.reconciled} />
        <Card label="Replayed" value={source.replayed} />
        <Card
          label="Oldest pending"
          value={source.oldestPendingAgeMs === null ? "—" : `${formatDuration(source.oldestPendingAgeMs)} ago`}
        />
        <Card label="Rejected signatures" value={source.rejectedSignatures ?? "not stored"} id="rejected" />
      </div>
      <table class="rows">
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
              ["Received → finished", source.processingLatencyMs],
              ["Attempt duration", source.attemptDurationMs],
              ...(source.ackLatencyMs ? ([["Acknowledgement", source.ackLatencyMs]] as const) : []),
            ] as const
          ).map(([label, value]) => (
            <tr>
              <td data-label="Latency">{label}</td>
              <td data-label="Samples" class="num">
                {value.samples}
              </td>
              <td data-label="p50" class="num">
                {formatDuration(value.p50)}
              </td>
              <td data-label="p95" class="num">
                {formatDuration(value.p95)}
              </td>
              <td data-label="p99" class="num">
                {formatDuration(value.p99)}
              </td>
              <td data-label="Max" class="num">
                {formatDuration(value.max)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
