import type { ReadableAlert } from "../../health/alerts";
import { AlertsTable } from "../components";
import { Page } from "../layout";

export function AlertsPage(props: { alerts: ReadableAlert[]; source?: string; state?: string }) {
  return (
    <Page title="Alerts" current="/admin/alerts">
      <h1>Alerts{props.source ? ` for ${props.source}` : ""}</h1>
      <form class="filters" method="get" action="/admin/alerts">
        <label>
          Source
          <input name="source" value={props.source ?? ""} />
        </label>
        <label>
          State
          <select name="state">
            <option value="">any</option>
            <option value="open" selected={props.state === "open"}>
              open
            </option>
            <option value="resolved" selected={props.state === "resolved"}>
              resolved
            </option>
          </select>
        </label>
        <button type="submit">Filter</button>
        <a href="/admin/alerts">clear</a>
      </form>
      <AlertsTable alerts={props.alerts} />
    </Page>
  );
}
