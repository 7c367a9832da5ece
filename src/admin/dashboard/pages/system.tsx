import type { SourcesHealth } from "../../../sources/registry";
import { Page } from "../layout";
import { formatMegabytes, type SystemSummary, type shardTotals } from "../system-summary";
import { ConfigProblems } from "./overview";
import { SystemPanel } from "./system-panel";

/**
 * /admin/system: the System panel in full, with the claim shards' sizes. Nothing on it reads D1 beyond the one
 * trivial query per database that gives its size, so it renders during a D1 outage; every error page links here.
 */
export function SystemPage(props: {
  summary: SystemSummary;
  shards: ReturnType<typeof shardTotals>;
  shardAlertBytes: number;
  config: SourcesHealth;
}) {
  return (
    <Page title="System" current="/admin/system">
      <h1>System</h1>
      <ConfigProblems config={props.config} />
      <SystemPanel summary={props.summary} detailed />
      <h2>Claim shards</h2>
      <ShardSizes shards={props.shards} alertBytes={props.shardAlertBytes} />
    </Page>
  );
}

function ShardSizes(props: { shards: ReturnType<typeof shardTotals>; alertBytes: number }) {
  const { shards } = props;
  if (shards === null)
    return (
      <p class="muted" id="shard-sizes">
        Shard sizes could not be read: a shard did not answer.
      </p>
    );
  if (shards.largest === null)
    return (
      <p class="muted" id="shard-sizes">
        No configured source, so no claim shard.
      </p>
    );
  const overThreshold = shards.largest.bytes > props.alertBytes;
  return (
    <p id="shard-sizes" class={overThreshold ? "error" : undefined}>
      {shards.count} shards hold {formatMegabytes(shards.totalBytes)} in all; the largest,{" "}
      <code>{shards.largest.shard}</code>, holds {formatMegabytes(shards.largest.bytes)} (a shard-storage incident opens
      above {formatMegabytes(props.alertBytes)}).
    </p>
  );
}

/**
 * The overview when its statistics cannot be read (D1 down, most likely): the System panel still says what the
 * monitor knows, instead of an error page with nothing on it.
 */
export function OverviewWithoutStatsPage(props: { summary: SystemSummary; config: SourcesHealth }) {
  return (
    <Page title="Sources" current="/admin">
      <h1>Sources</h1>
      <p class="error" id="stats-unavailable">
        The source statistics could not be read from D1 (the error is in the Worker's log). What the system monitor
        knows, which does not depend on D1:
      </p>
      <ConfigProblems config={props.config} />
      <SystemPanel summary={props.summary} linkToDetails detailed />
    </Page>
  );
}
