import { JOB_STATUSES } from "../../../replay/replay-filter";
import type { DryRun, JobView } from "../../../replay/replay-jobs";
import type { Role } from "../../guards/actor";
import { Page } from "../layout";
import { RoleGate } from "../role-gate";
import { FilterProblem, TextFilter } from "./filter-fields";

type Query = Record<string, string | undefined>;

/**
 * Bulk replay by filter on the dashboard (docs/operating.md, "Bulk replay by filter"): a plain form under the receipts
 * list; "Dry run" answers the count and a sample with the same filter ready to replay; "Replay" starts the job and
 * shows its progress page. No script: a reload of the job page shows how far it got.
 */
/**
 * Any role may ask for a dry run (it writes nothing); the Replay button that follows one is an operator's, so below
 * that role a note stands in its place.
 */
export function ReplayByFilterForm(props: { query: Query; confirm?: { role: Role } }) {
  const { query } = props;
  return (
    <form class="filters" method="post" action="/admin/replays" id="replay-by-filter">
      <h2>Replay by filter</h2>
      <TextFilter query={query} name="source" label="Source" />
      <TextFilter query={query} name="route" label="Route" placeholder="every route" />
      <label>
        Status
        <select name="status">
          {JOB_STATUSES.map((status) => (
            <option value={status} selected={(query.status ?? "dead") === status}>
              {status}
            </option>
          ))}
        </select>
      </label>
      <TextFilter query={query} name="type" label="Type" />
      <TextFilter query={query} name="since" label="Since (ISO or ms)" />
      <TextFilter query={query} name="until" label="Until" />
      <TextFilter query={query} name="error" label="Error contains" />
      <button type="submit" name="intent" value="dry-run" class={props.confirm ? "secondary" : undefined}>
        Dry run
      </button>
      {props.confirm && (
        <RoleGate role={props.confirm.role} needs="operator" doing="replay">
          <button type="submit" name="intent" value="replay">
            Replay
          </button>
        </RoleGate>
      )}
    </form>
  );
}

export function ReplayDryRunPage(props: { query: Query; dryRun: DryRun | null; role: Role; problem?: string }) {
  const { dryRun } = props;
  return (
    <Page title="Replay by filter" current="/admin/receipts">
      <h1>Replay by filter</h1>
      <FilterProblem problem={props.problem} />
      {dryRun && (
        <>
          <p id="dry-run-count">
            {`Would replay ${dryRun.complete ? "" : "at least "}${dryRun.count} ${dryRun.count === 1 ? "delivery" : "deliveries"}`}
            {dryRun.expired > 0 ? ` (${dryRun.expired} more are past payload retention).` : "."}
          </p>
          <ul>
            {dryRun.sample.map((row) => (
              <li>
                <a href={`/admin/receipts/${row.receiptId}`}>{row.receiptId}</a> {row.route ?? "its own route"} (
                {row.kind})
              </li>
            ))}
          </ul>
        </>
      )}
      <ReplayByFilterForm
        query={props.query}
        confirm={dryRun !== null && dryRun.count > 0 ? { role: props.role } : undefined}
      />
    </Page>
  );
}

export function ReplayJobPage(props: { job: JobView }) {
  const { job } = props;
  return (
    <Page title={`Replay job ${job.jobKey}`} current="/admin/receipts">
      <h1>Replay job {job.jobKey}</h1>
      <dl id="replay-job">
        <dt>State</dt>
        <dd>{job.state}</dd>
        <dt>Source</dt>
        <dd>{`${job.source}${job.route ? ` route ${job.route}` : ""}`}</dd>
        <dt>Started by</dt>
        <dd>{job.origin}</dd>
        <dt>Replayed</dt>
        <dd>{`${job.replayed} (${job.scanned} receipts walked${job.expired > 0 ? `, ${job.expired} past payload retention` : ""})`}</dd>
      </dl>
      {job.state === "running" && <p>The cron goes on with it: reload this page to see how far it got.</p>}
    </Page>
  );
}
