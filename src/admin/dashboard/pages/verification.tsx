import { formatAgo, percent } from "../../health/verification-health";
import type { VerificationReport } from "../../health/verification-report";
import { formatInstant } from "../format";

/**
 * The source page's "Verification" section (docs/operating.md, "Verification health"): which secret verified the
 * window's deliveries and when each last did, whether an older one can go, and the refusals by reason per hour.
 */

const COUNTS_NOTE: Record<VerificationReport["counts"], string> = {
  "analytics-engine": "Counts from Analytics Engine.",
  "dev-server-memory":
    "Counts by this dev server since it started (wrangler dev keeps no Analytics Engine data to read back).",
  "not-stored":
    "Counts not stored: bind the METRICS Analytics Engine dataset and set METRICS_ACCOUNT_ID and METRICS_API_TOKEN (docs/metrics.md). Last uses come from the claim shards.",
};

export function VerificationPanel(props: { report: VerificationReport; now: number }) {
  const { report, now } = props;
  return (
    <section id="verification">
      <h2>Verification</h2>
      {report.warnings.length > 0 && (
        <ul class="reasons" id="verification-warnings">
          {report.secrets
            .filter((secret) => secret.message)
            .map((secret) => (
              <li class={secret.advice}>{secret.message}</li>
            ))}
        </ul>
      )}
      <table class="rows" id="verification-secrets">
        <thead>
          <tr>
            <th>Secret</th>
            <th>Kind</th>
            <th class="num">Deliveries</th>
            <th class="num">Share</th>
            <th>Last used</th>
            <th>Advice</th>
          </tr>
        </thead>
        <tbody>
          {report.secrets.map((secret) => (
            <tr>
              <td data-label="Secret" class="mono">
                {secret.name}
              </td>
              <td data-label="Kind">
                {secret.kind}
                {secret.expiresAt !== null && ` · expires ${formatInstant(secret.expiresAt)}`}
              </td>
              <td data-label="Deliveries" class="num">
                {secret.deliveries ?? "—"}
              </td>
              <td data-label="Share" class="num">
                {secret.share === null ? "—" : percent(secret.share)}
              </td>
              <td data-label="Last used">
                {secret.lastVerifiedAt === null ? "—" : formatAgo(secret.lastVerifiedAt, now)}
              </td>
              <td data-label="Advice">
                <span class={`badge ${secret.advice}`}>{secret.advice.replaceAll("-", " ")}</span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Rejections report={report} />
      <p class="muted chart-note">{COUNTS_NOTE[report.counts]}</p>
    </section>
  );
}

function Rejections(props: { report: VerificationReport }) {
  const { report } = props;
  if (report.rejected === null) return null;
  const reasons = Object.keys(report.rejectionsByReason).sort();
  return (
    <>
      <p id="verification-rejections">
        Rejected {report.rejected} of {report.rejected + (report.verified ?? 0)}
        {report.rejectionRate !== null && ` (${percent(report.rejectionRate)})`}
        {reasons.length > 0 &&
          `: ${reasons.map((reason) => `${reason} ${report.rejectionsByReason[reason]}`).join(", ")}`}
      </p>
      {reasons.length > 0 && (
        <table class="rows" id="verification-hourly">
          <thead>
            <tr>
              <th>Hour (UTC)</th>
              <th class="num">Verified</th>
              {reasons.map((reason) => (
                <th class="num">{reason}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {report.hourly.map((hour) => (
              <tr>
                <td data-label="Hour (UTC)">{formatInstant(hour.hour)}</td>
                <td data-label="Verified" class="num">
                  {hour.verified}
                </td>
                {reasons.map((reason) => (
                  <td data-label={reason} class="num">
                    {hour.rejected[reason] ?? 0}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
