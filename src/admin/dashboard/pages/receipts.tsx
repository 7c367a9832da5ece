import { PROVENANCES, RECEIPT_STATUSES } from "../../receipts/filters";
import type { ReceiptSummary, Page as ResultPage } from "../../receipts/receipt-slice";
import { Pager, ReceiptsTable } from "../components";
import { Page } from "../layout";
import { FilterProblem, TextFilter } from "./filter-fields";
import { ReplayByFilterForm } from "./replay-job";

type Query = Record<string, string | undefined>;

const STATUS_CHOICES = [
  ...RECEIPT_STATUSES.map((status) => ({ value: status, label: status })),
  { value: "pending,processing", label: "unfinished" },
];

export function ReceiptsPage(props: { query: Query; page: ResultPage<ReceiptSummary> | null; problem?: string }) {
  const { query } = props;
  return (
    <Page title="Receipts" current="/admin/receipts">
      <h1>Receipts</h1>
      <form class="filters" method="get" action="/admin/receipts">
        <TextFilter query={query} name="source" label="Source" />
        <label>
          Status
          <select name="status">
            <option value="">any</option>
            {STATUS_CHOICES.map((status) => (
              <option value={status.value} selected={query.status === status.value}>
                {status.label}
              </option>
            ))}
          </select>
        </label>
        <TextFilter query={query} name="type" label="Type" />
        <TextFilter query={query} name="eventKey" label="Event key" />
        <TextFilter query={query} name="subject" label="Subject" />
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
        <TextFilter query={query} name="since" label="Since (ISO or ms)" />
        <TextFilter query={query} name="until" label="Until" />
        <button type="submit">Filter</button>
        <a href="/admin/receipts">clear</a>
      </form>
      <FilterProblem problem={props.problem} />
      {props.page && (
        <>
          <ReceiptsTable receipts={props.page.receipts} />
          <Pager
            path="/admin/receipts"
            query={query}
            prevCursor={props.page.prevCursor}
            nextCursor={props.page.nextCursor}
          />
        </>
      )}
      <ReplayByFilterForm query={{ source: query.source, type: query.type, since: query.since, until: query.until }} />
    </Page>
  );
}
