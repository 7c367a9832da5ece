import type { AuditLogQuery, AuditLogPage as AuditLogRows } from "../../audit-log/list";
import { Pager } from "../components";
import { formatInstant } from "../format";
import { Badge, Page } from "../layout";

/** /admin/audit-log: every operator action, newest first, who did it and whether their role allowed it. */
export function AuditLogPage(props: { page: AuditLogRows; query: AuditLogQuery }) {
  const { query } = props;
  return (
    <Page title="Audit log" current="/admin/audit-log">
      <h1>Audit log</h1>
      <p class="muted">
        Operator actions — replay, dismiss, restore, pause, resume, acknowledge, resolve, approve, revoke — through the
        API, the CLI or this dashboard, allowed or refused for the role of whoever asked.
      </p>
      <form class="filters" method="get" action="/admin/audit-log">
        <label>
          Actor
          <input name="actor" value={query.actor ?? ""} />
        </label>
        <label>
          Outcome
          <select name="outcome">
            <option value="">any</option>
            <option value="allowed" selected={query.outcome === "allowed"}>
              allowed
            </option>
            <option value="refused" selected={query.outcome === "refused"}>
              refused
            </option>
          </select>
        </label>
        <button type="submit">Filter</button>
        <a href="/admin/audit-log">clear</a>
      </form>
      {props.page.actions.length === 0 ? (
        <p class="muted">No operator action recorded.</p>
      ) : (
        <table id="audit-log" class="rows">
          <thead>
            <tr>
              <th>When</th>
              <th>Actor</th>
              <th>Role</th>
              <th>Via</th>
              <th>Action</th>
              <th>Target</th>
              <th class="num">Affected</th>
              <th>Outcome</th>
            </tr>
          </thead>
          <tbody>
            {props.page.actions.map((row) => (
              <tr data-action={row.action} data-outcome={row.outcome}>
                <td data-label="When">{formatInstant(row.at)}</td>
                <td data-label="Actor">{row.actor}</td>
                <td data-label="Role">{row.role}</td>
                <td data-label="Via">{row.via}</td>
                <td data-label="Action">{row.action}</td>
                <td data-label="Target" class="mono">
                  {row.target}
                </td>
                <td data-label="Affected" class="num">
                  {row.affected}
                </td>
                <td data-label="Outcome">
                  <Badge value={row.outcome} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager
        path="/admin/audit-log"
        query={{ actor: query.actor, outcome: query.outcome, action: query.action }}
        prevCursor={null}
        nextCursor={props.page.nextCursor}
      />
    </Page>
  );
}
