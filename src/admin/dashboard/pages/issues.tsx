import type { IssueListing } from "../../../reconcile/issue-desk";
import { MAX_ISSUE_NOTE_LENGTH } from "../../actions/issues";
import type { Role } from "../../guards/actor";
import { Flash } from "../components";
import { Badge, formatInstant, Page } from "../layout";
import { RoleGate } from "../role-gate";

/**
 * The issues (docs/operating.md "Issues and notices"): each with what it is about, its state and its history, and
 * plain forms to acknowledge (with a note) and resolve; above them, each notice channel and whether it is failing.
 */

const KIND_LABELS: Record<string, string> = {
  "breaker-open": "Circuit breaker open",
  "dead-letters": "Dead letters",
  "signature-failures": "Signature failures",
  silence: "Silence",
  "backlog-age": "Backlog age",
  "store-near-limit": "Store near its limit",
};

type Issue = IssueListing["issues"][number];
type Channel = IssueListing["channels"][number];

export function IssuesPage(props: { listing: IssueListing; all: boolean; role: Role; flash?: string }) {
  const { issues, channels } = props.listing;
  return (
    <Page title="Issues" current="/admin/issues">
      <h1>Issues</h1>
      <Flash message={props.flash} />
      <p class="actions">
        {props.all ? (
          <a href="/admin/issues">Open and acknowledged only</a>
        ) : (
          <a href="/admin/issues?all=1">Resolved too</a>
        )}
      </p>
      {issues.length === 0 ? (
        <p class="muted" id="no-issues">
          {props.all ? "No issues." : "No open issues."}
        </p>
      ) : (
        <table id="issues" class="rows">
          <thead>
            <tr>
              <th>Opened</th>
              <th>Issue</th>
              <th>Concerns</th>
              <th>Severity</th>
              <th>State</th>
              <th>What happened</th>
              <th>Action</th>
            </tr>
          </thead>
          <tbody>
            {issues.map((issue) => (
              <IssueRow issue={issue} role={props.role} />
            ))}
          </tbody>
        </table>
      )}
      <h2>Notice channels</h2>
      <ChannelsTable channels={channels} />
    </Page>
  );
}

function IssueRow(props: { issue: Issue; role: Role }) {
  const { issue } = props;
  const action = `/admin/issues/${encodeURIComponent(issue.issueKey)}`;
  return (
    <tr data-issue={issue.issueKey}>
      <td data-label="Opened">{formatInstant(issue.openedAt)}</td>
      <td data-label="Issue">{KIND_LABELS[issue.kind] ?? issue.kind}</td>
      <td data-label="Concerns">
        <Concerns issue={issue} />
      </td>
      <td data-label="Severity">
        <Badge value={issue.severity} />
      </td>
      <td data-label="State">
        <Badge value={issue.state} />
      </td>
      <td data-label="What happened">
        <span class="issue-message">{issue.message}</span>
        {issue.acknowledgeNote && <div class="muted issue-note">Note: {issue.acknowledgeNote}</div>}
        <details>
          <summary>History</summary>
          <ol class="issue-history">
            {issue.history.map((entry) => (
              <li>
                {formatInstant(entry.at)} {entry.event}: {entry.detail}
              </li>
            ))}
          </ol>
        </details>
      </td>
      <td data-label="Action">
        {issue.state !== "resolved" ? (
          <RoleGate
            role={props.role}
            needs="operator"
            doing={issue.state === "open" ? "acknowledge or resolve" : "resolve"}
          >
            {issue.state === "open" && (
              <form class="issue-action" method="post" action={`${action}/acknowledge`}>
                <input
                  name="note"
                  required
                  maxlength={MAX_ISSUE_NOTE_LENGTH}
                  placeholder="What is being done"
                  aria-label="Note"
                />
                <button type="submit">Acknowledge</button>
              </form>
            )}
            <form class="issue-action" method="post" action={`${action}/resolve`}>
              <button type="submit" class="secondary">
                Resolve
              </button>
            </form>
          </RoleGate>
        ) : (
          <span class="muted">
            {issue.resolvedBy === "operator" ? "Resolved by hand" : "Cleared"} {formatInstant(issue.resolvedAt)}
          </span>
        )}
      </td>
    </tr>
  );
}

function Concerns(props: { issue: Issue }) {
  const { source, route, store } = props.issue;
  if (source !== null) {
    return (
      <a href={`/admin/sources/${encodeURIComponent(source)}`}>{route === null ? source : `${source} / ${route}`}</a>
    );
  }
  return store === null ? <>the receiver</> : <a href="/admin/system">{store}</a>;
}

function ChannelsTable(props: { channels: Channel[] }) {
  if (props.channels.length === 0)
    return <p class="muted">None configured: set NOTIFY_SLACK_URL, NOTIFY_WEBHOOK_URL or PAGERDUTY_ROUTING_KEY.</p>;
  return (
    <table id="issue-channels" class="rows">
      <thead>
        <tr>
          <th>Channel</th>
          <th>State</th>
          <th class="num">Waiting</th>
          <th class="num">Given up</th>
          <th>Last sent</th>
          <th>Last failure</th>
        </tr>
      </thead>
      <tbody>
        {props.channels.map((channel) => (
          <tr data-channel={channel.channel}>
            <td data-label="Channel">{channel.channel}</td>
            <td data-label="State">
              <Badge value={channelState(channel)} />
            </td>
            <td data-label="Waiting" class="num">
              {channel.waiting}
            </td>
            <td data-label="Given up" class="num">
              {channel.gaveUp}
            </td>
            <td data-label="Last sent">{channel.lastSentAt === null ? "—" : formatInstant(channel.lastSentAt)}</td>
            <td data-label="Last failure">
              <LastFailure channel={channel} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** When the channel last failed and why; once a later notice went through, the error is cleared: say so. */
function LastFailure(props: { channel: Channel }) {
  const { lastFailedAt, lastError } = props.channel;
  if (lastFailedAt === null) return <>—</>;
  return <>{`${formatInstant(lastFailedAt)}${lastError === null ? " (recovered since)" : `: ${lastError}`}`}</>;
}

/** Failing while its latest attempt failed (a later success clears it); ok once something went through. */
export function channelState(channel: Channel): "ok" | "failing" | "unused" {
  if (channel.lastFailedAt !== null && (channel.lastSentAt === null || channel.lastFailedAt > channel.lastSentAt))
    return "failing";
  return channel.lastSentAt === null ? "unused" : "ok";
}
