import { localOutcomes, type OutcomeCount } from "../../lib/local-rejections";
import { metricsQuerySettings, query, SOURCE_NAME } from "./analytics-query";

/**
 * One source's deliveries per hour by outcome, for the verification health: which secret verified each one answered
 * 200, and why each refused one was refused. Read from the METRICS dataset, whose delivery points carry the
 * verifying secret's name in blob5 (src/lib/analytics.ts), or under wrangler dev from the dev server's own tally
 * (src/lib/local-rejections.ts); never from a row per delivery.
 */

export type OutcomeCounts =
  | { origin: "analytics-engine" | "dev-server-memory"; counts: OutcomeCount[] }
  | { origin: "not-stored"; counts: null; note?: string };

/** The SQL over the dataset; exported for docs/operating.md's query and its test. */
export function outcomesSql(dataset: string, source: string, hours: number): string {
  return `SELECT blob3 AS disposition, blob4 AS signature, blob5 AS secret, toStartOfInterval(timestamp, INTERVAL '1' HOUR) AS hour,
  SUM(_sample_interval * double2) AS deliveries
FROM ${dataset} WHERE timestamp > NOW() - INTERVAL '${Math.max(1, Math.ceil(hours))}' HOUR AND blob1 = 'delivery' AND index1 = '${source}'
  AND blob3 IN ('accepted', 'duplicate', 'quarantined', 'rejected')
GROUP BY disposition, signature, secret, hour ORDER BY hour`;
}

interface OutcomeRow {
  disposition: string;
  signature: string;
  secret: string;
  hour: string;
  deliveries: number | string;
}

/** Rows of several dispositions in one hour fold into one count per outcome. */
function foldRows(rows: readonly OutcomeRow[]): OutcomeCount[] {
  const folded = new Map<string, OutcomeCount>();
  for (const row of rows) {
    const hour = Date.parse(`${row.hour.replace(" ", "T")}Z`);
    const outcome =
      row.disposition === "rejected"
        ? { kind: "rejected" as const, reason: row.signature }
        : { kind: "verified" as const, secret: row.secret ?? "" };
    const key = `${hour}\u0000${outcome.kind}\u0000${outcome.kind === "rejected" ? outcome.reason : outcome.secret}`;
    const seen = folded.get(key);
    if (seen) seen.deliveries += Number(row.deliveries);
    else folded.set(key, { hour, outcome, deliveries: Number(row.deliveries) });
  }
  return [...folded.values()];
}

/** The counts since `windowMs` ago, or why there are none. Never throws. */
export async function outcomeCounts(
  env: object,
  source: string,
  windowMs: number,
  fetcher: typeof fetch = fetch,
): Promise<OutcomeCounts> {
  const settings = metricsQuerySettings(env);
  if (settings && SOURCE_NAME.test(source)) {
    try {
      const rows = await query<OutcomeRow>(
        settings,
        outcomesSql(settings.dataset, source, windowMs / 3_600_000),
        fetcher,
      );
      return { origin: "analytics-engine", counts: foldRows(rows) };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return {
        origin: "not-stored",
        counts: null,
        note: `The METRICS dataset is bound but could not be queried (${reason.slice(0, 200)}).`,
      };
    }
  }
  const local = localOutcomes(env, Date.now() - windowMs, source);
  return local ? { origin: "dev-server-memory", counts: local } : { origin: "not-stored", counts: null };
}
