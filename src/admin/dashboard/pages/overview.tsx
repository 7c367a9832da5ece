import type { SourcesHealth } from "../../../sources/registry";
import type { ReadableAlert } from "../../health/alerts";
import type { SourceSeries } from "../../stats/series";
import type { Percentiles, StatsReport } from "../../stats/stats";
import { AlertsTable, HealthReasons, ProblemList } from "../components";
import { formatDuration, formatInstant } from "../format";
import { Badge, Page } from "../layout";
import { Sparkline } from "../sparkline";
import type { SystemSummary } from "../system-summary";
import { SystemPanel } from "./system-panel";

function latency(value: Percentiles) {
  return value.samples === 0
    ? "—"
    : `${formatDuration(value.p50)} / ${formatDuration(value.p95)} / ${formatDuration(value.p99)}`;
}

/** Broken source tables, each with its problems: those sources answer 503 until the table is fixed. */
export function ConfigProblems(props: { config: SourcesHealth }) {
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
        {broken.length === 1
          ? "One source's configuration is invalid"
          : `${broken.length} sources' configurations are invalid`}
        : each answers 503 (its sender retries) until its table is fixed and redeployed. Every other source keeps
        accepting.
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

function ConfigNote(props: { configured: boolean; problems: string[] | undefined }) {
  if (props.problems) return <span class="muted"> (configuration invalid)</span>;
  return props.configured ? null : <span class="muted"> (no longer configured)</span>;
}

/** Where the numbers the table cannot show are, and whether Analytics Engine fills them in. */
export function OriginNote(props: { report: StatsReport }) {
  const problem = props.report.notes.analyticsEngine;
  if (problem)
    return (
      <p class="error" id="origin-note">
        {problem}
      </p>
    );
  if (props.report.origins.rejectedSignatures === "dev-server-memory") {
    return (
      <p class="muted" id="origin-note">
        Counts and latencies come from D1; rejected deliveries from this dev server's own count since it started
        (wrangler dev keeps no Analytics Engine data). Acknowledgement latency is not kept locally.
      </p>
    );
  }
  if (props.report.origins.rejectedSignatures === "analytics-engine") {
    return (
      <p class="muted">
        Rejected deliveries and acknowledgement latency come from the METRICS Analytics Engine dataset; everything else
        from D1.
      </p>
    );
  }
  return (
    <p class="muted" id="origin-note">
      Counts and latencies come from D1. Rejected deliveries and acknowledgement latency are not stored there (a
      rejected delivery writes nothing): the METRICS Analytics Engine dataset records them when bound, and set
      METRICS_ACCOUNT_ID and METRICS_API_TOKEN to see them here (docs/metrics.md), or read the{" "}
      <code>delivery.rejected</code> and <code>delivery</code> lines in Workers Logs.
    </p>
  );
}

export function OverviewPage(props: {
  report: StatsReport;
  series: SourceSeries;
  alerts: ReadableAlert[];
  config: SourcesHealth;
  system: SystemSummary;
}) {
  const { report } = props;
  return (
    <Page title="Sources" current="/admin">
      <h1>Sources</h1>
      <ConfigProblems config={props.config} />
      <SystemPanel summary={props.system} linkToDetails />
      <p class="muted">
        Last {formatDuration(report.windowMs)} (since {formatInstant(report.since)}). Latencies are p50 / p95 / p99.
      </p>
      <table id="sources" class="rows">
        <thead>
          <tr>
            <th>Source</th>
            <th>Health</th>
            <th class="num">Received</th>
            <th class="num">Processed</th>
            <th class="num">Stale</th>
            <th class="num">Skipped</th>
            <th class="num">Pending</th>
            <th class="num">Dead</th>
            <th class="num">Quarantined</th>
            <th>Oldest pending</th>
            <th>Pickup</th>
            <th>Received → finished</th>
          </tr>
        </thead>
        <tbody>
          {report.sources.map((source) => {
            const name = encodeURIComponent(source.source);
            const points = props.series.get(source.source);
            return (
              <tr data-source={source.source}>
                <td data-label="Source">
                  <span>
                    <a href={`/admin/sources/${name}`}>{source.source}</a>
                    <ConfigNote configured={source.configured} problems={props.config.invalid[source.source]} />
                  </span>
                </td>
                <td data-label="Health">
                  <span>
                    <Badge value={source.health} />
                    <HealthReasons source={source.source} reasons={source.healthReasons} />
                  </span>
                </td>
                {/* The sparkline beside the count it charts, on one line: under the name it read as an underline. */}
                <td data-label="Received" class="num spark-cell">
                  {source.received}
                  {points && <Sparkline points={points} label={`${source.source}: received per hour, last 24 hours`} />}
                </td>
                <td data-label="Processed" class="num">
                  {source.processed}
                </td>
                <td data-label="Stale" class="num">
                  {source.stale}
                </td>
                <td data-label="Skipped" class="num">
                  {source.skipped > 0 ? (
                    <a href={`/admin/receipts?source=${name}&status=skipped`}>{source.skipped}</a>
                  ) : (
                    0
                  )}
                </td>
                <td data-label="Pending" class="num">
                  {source.pending}
                </td>
                <td data-label="Dead (all time)" class="num">
                  {source.deadTotal > 0 ? <a href={`/admin/dead?source=${name}`}>{source.deadTotal}</a> : 0}
                </td>
                <td data-label="Quarantined" class="num">
                  {source.quarantined}
                </td>
                <td data-label="Oldest pending">
                  {source.oldestPendingAgeMs === null ? "—" : `${formatDuration(source.oldestPendingAgeMs)} ago`}
                </td>
                <td data-label="Pickup">{latency(source.pickupLatencyMs)}</td>
                <td data-label="Received → finished">{latency(source.processingLatencyMs)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <OriginNote report={report} />
      <h2>Open alerts</h2>
      <AlertsTable alerts={props.alerts} />
    </Page>
  );
}
