import type { Role } from "../../guards/actor";
import type { DeadDeliveriesPage } from "../../receipts/dead-deliveries";
import type { ReceiptSummary, Page as ResultPage } from "../../receipts/receipt-slice";
import { Flash, Pager, ReceiptsTable } from "../components";
import { Page } from "../layout";
import { RoleGate } from "../role-gate";
import { DeadDeliveriesSection } from "./dead-deliveries";
import { FilterProblem, TextFilter } from "./filter-fields";

type Query = Record<string, string | undefined>;

/**
 * Dead letters, filterable, with the three things an operator does to them: replay (the cause is fixed and the
 * event should apply), dismiss (it should not, or it was handled another way) and, for dismissed ones, restore.
 * Below them, further routes' dead deliveries, each replayable alone (./dead-deliveries.tsx).
 */
export function DeadLettersPage(props: {
  query: Query;
  page: ResultPage<ReceiptSummary> | null;
  /** Further routes' dead deliveries (none on the dismissed view). */
  deliveries: DeadDeliveriesPage | null;
  dismissed: boolean;
  /** The signed-in role: replay, dismiss and restore are an operator's. */
  role: Role;
  flash?: string;
  problem?: string;
}) {
  const { query } = props;
  const receipts = props.page?.receipts ?? [];
  return (
    <Page title="Dead letters" current="/admin/dead">
      <h1>{props.dismissed ? "Dismissed dead letters" : "Dead letters"}</h1>
      <Flash message={props.flash} />
      <form class="filters" method="get" action="/admin/dead">
        <TextFilter query={query} name="source" label="Source" />
        <TextFilter query={query} name="type" label="Type" />
        <TextFilter query={query} name="eventKey" label="Event key" />
        <TextFilter query={query} name="since" label="Since (ISO or ms)" />
        <TextFilter query={query} name="until" label="Until" />
        <label>
          Show
          <select name="show">
            <option value="">dead</option>
            <option value="dismissed" selected={props.dismissed}>
              dismissed
            </option>
          </select>
        </label>
        <button type="submit">Filter</button>
        <a href="/admin/dead">clear</a>
      </form>
      <FilterProblem problem={props.problem} />
      {props.page && (
        <form method="post" action="/admin/dead/action">
          {receipts.length > 0 && (
            <RoleGate
              role={props.role}
              needs="operator"
              doing={props.dismissed ? "restore dead letters" : "replay or dismiss dead letters"}
            >
              <div class="actions">
                {props.dismissed ? (
                  <button type="submit" name="action" value="restore" id="restore-selected">
                    Restore selected to dead letters
                  </button>
                ) : (
                  <>
                    <button type="submit" name="action" value="replay" id="replay-selected">
                      Replay selected
                    </button>
                    <button type="submit" name="action" value="replay-page" class="secondary">
                      Replay all on this page
                    </button>
                    <button type="submit" name="action" value="dismiss" class="danger" id="dismiss-selected">
                      Dismiss selected
                    </button>
                  </>
                )}
              </div>
            </RoleGate>
          )}
          {receipts.map((receipt) => (
            <input type="hidden" name="pageReceiptId" value={receipt.receiptId} />
          ))}
          <input type="hidden" name="back" value={props.dismissed ? "dismissed" : ""} />
          <ReceiptsTable receipts={receipts} selectable />
          {!props.dismissed && receipts.length > 0 && (
            <p class="muted">
              Dismissing says the cause is fixed or the event needs no replay: it leaves the dead count (the source
              stops showing red) and can be restored.
            </p>
          )}
          {receipts.length > 0 && (
            <p class="muted" id="dead-body-retention">
              {props.dismissed
                ? "A dismissed dead letter's body goes at its source's payload retention; the receipt page says when."
                : "A dead letter keeps its body for its source's dead_letter_retention (by default as long as its key), so it can be replayed; each receipt page says until when."}
            </p>
          )}
        </form>
      )}
      {props.page && (
        <Pager path="/admin/dead" query={query} prevCursor={props.page.prevCursor} nextCursor={props.page.nextCursor} />
      )}
      {props.deliveries && <DeadDeliveriesSection page={props.deliveries} query={query} role={props.role} />}
    </Page>
  );
}
