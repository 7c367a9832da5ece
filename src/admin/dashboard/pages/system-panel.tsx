import type { Child } from "hono/jsx";
import { formatInstant } from "../format";
import {
  type DatabaseSize,
  formatMegabytes,
  formatPercent,
  incidentLabel,
  type SystemIncident,
  type SystemSummary,
} from "../system-summary";

/**
 * The system's own health, at the top of the overview and on /admin/system: the system monitor's incidents (it
 * is a Durable Object, so this answers while D1 is down), how full each receipt database is, and which sources
 * lack a secret (names only: the page is behind the admin session; values never leave the Worker). When nothing
 * needs attention it is one quiet line.
 */
export function SystemPanel(props: { summary: SystemSummary; linkToDetails?: boolean; detailed?: boolean }) {
  const { summary } = props;
  const details = props.linkToDetails ? (
    <>
      {" "}
      <a href="/admin/system">details</a>
    </>
  ) : null;
  if (summary.allWell && !props.detailed) {
    return (
      <section id="system" class="system-well">
        <p class="muted" id="system-quiet">
          System: all well — {databasesInOneLine(summary.databases ?? [])}.{details}
        </p>
        <ResolvedIncidents incidents={summary.resolvedUnrecorded} />
      </section>
    );
  }
  return (
    <section id="system">
      <h2>System{summary.allWell ? ": all well" : ""}</h2>
      {summary.monitorError !== null && (
        <p class="error" id="monitor-error">
          The system monitor did not answer ({summary.monitorError}): incidents cannot be listed until it does.
        </p>
      )}
      <OpenIncidents incidents={summary.open} />
      <ResolvedIncidents incidents={summary.resolvedUnrecorded} />
      <MissingSecrets missing={summary.missingSecrets} />
      <ExpiredSecrets expired={summary.expiredSecrets} />
      <DatabaseSizes databases={summary.databases} />
      {details && <p class="muted">Claim shard sizes and every detail:{details}</p>}
    </section>
  );
}

function databasesInOneLine(databases: DatabaseSize[]): string {
  return databases
    .map(
      (database) =>
        `${database.binding} ${formatMegabytes(database.bytes ?? 0)} (${formatPercent(database.fraction ?? 0)})`,
    )
    .join(" · ");
}

function recordedNote(incident: SystemIncident): string {
  if (incident.state === "open") return incident.recordedState === "open" ? "recorded in D1" : "not yet recorded in D1";
  return "resolution not yet recorded in D1";
}

function OpenIncidents(props: { incidents: SystemIncident[] }) {
  if (props.incidents.length === 0) return null;
  return (
    <ul class="reasons" id="system-incidents">
      {props.incidents.map((incident) => (
        <li data-incident={incident.kind}>
          <strong>{incidentLabel(incident.kind)}</strong> since {formatInstant(incident.openedAt)}:{" "}
          <span class="incident-message">{incident.message}</span> <span class="muted">({recordedNote(incident)})</span>
        </li>
      ))}
    </ul>
  );
}

function ResolvedIncidents(props: { incidents: SystemIncident[] }) {
  if (props.incidents.length === 0) return null;
  return (
    <ul class="muted system-resolved" id="system-resolved">
      {props.incidents.map((incident) => (
        <li data-incident={incident.kind}>
          {incidentLabel(incident.kind)} resolved {formatInstant(incident.resolvedAt)} (open since{" "}
          {formatInstant(incident.openedAt)}); {recordedNote(incident)}.
        </li>
      ))}
    </ul>
  );
}

function SecretNames(props: { names: string[] }) {
  return (
    <>
      {props.names.map((name, index) => (
        <>
          {index > 0 && ", "}
          <code>{name}</code>
        </>
      ))}
    </>
  );
}

/**
 * Sources that accept nothing until a secret is fixed, each with the secret names concerned (never a value): one
 * list for secrets that are unset and one for secrets that have all expired, told apart by `kind`.
 */
function SourcesWithSecretProblem(props: {
  kind: "missing" | "expired";
  sources: SystemSummary["missingSecrets"];
  children: Child;
}) {
  if (props.sources.length === 0) return null;
  return (
    <div class="error" id={`${props.kind}-secrets`}>
      <p>{props.children}</p>
      <ul>
        {props.sources.map(({ source, secrets }) => (
          <li {...{ [`data-${props.kind}-source`]: source }}>
            <strong>{source}</strong>: <SecretNames names={secrets} />
          </li>
        ))}
      </ul>
    </div>
  );
}

function ExpiredSecrets(props: { expired: SystemSummary["expiredSecrets"] }) {
  const count = props.expired.length;
  return (
    <SourcesWithSecretProblem kind="expired" sources={props.expired}>
      {count === 1 ? "One source has" : `${count} sources have`} only expired signing secrets: each answers 503 to every
      delivery (its sender retries) until a current secret is listed in its <code>secrets</code> and deployed.
    </SourcesWithSecretProblem>
  );
}

function MissingSecrets(props: { missing: SystemSummary["missingSecrets"] }) {
  const count = props.missing.length;
  return (
    <SourcesWithSecretProblem kind="missing" sources={props.missing}>
      {count === 1 ? "One source lacks" : `${count} sources lack`} a secret: each answers 503 to every delivery (its
      sender retries) until it is set with <code>wrangler secret put &lt;name&gt;</code>.
    </SourcesWithSecretProblem>
  );
}

function DatabaseSizes(props: { databases: DatabaseSize[] | null }) {
  if (props.databases === null) return <p class="muted">Database sizes could not be read.</p>;
  return (
    <table id="database-sizes" class="rows">
      <thead>
        <tr>
          <th>Database</th>
          <th class="num">Size</th>
          <th class="num">Of 10 GB</th>
        </tr>
      </thead>
      <tbody>
        {props.databases.map((database) => (
          <tr data-database={database.binding} class={database.state === "ok" ? undefined : database.state}>
            <td data-label="Database">{database.binding}</td>
            <td data-label="Size" class="num">
              {database.bytes === null ? "did not answer" : formatMegabytes(database.bytes)}
            </td>
            <td data-label="Of 10 GB" class="num">
              {database.fraction === null ? "—" : formatPercent(database.fraction)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
