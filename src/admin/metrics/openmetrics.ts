/**
 * The OpenMetrics text format (version 1.0.0), as a pure rendering of metric families: each family's HELP, TYPE
 * and UNIT lines, then its samples, families never interleaved, and `# EOF` last. Only what the scrape endpoint
 * (./scrape.ts) needs: gauges, and summaries given as quantiles alone (their `_count` and `_sum` would have to be
 * all-time counters, which the stats do not keep).
 */

export const OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8";

export type Labels = Readonly<Record<string, string>>;

export interface Sample {
  labels: Labels;
  value: number;
}

export interface MetricFamily {
  /** `webhook_receiver_…`; with a unit, it ends in `_<unit>` as the format requires. */
  name: string;
  type: "gauge" | "summary";
  help: string;
  unit?: "seconds" | "bytes";
  samples: readonly Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A label value inside its double quotes: backslash, double quote and line feed are escaped (the spec's three). */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** HELP text escapes backslash and line feed only. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function renderLabels(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  for (const [name] of entries) if (!LABEL_NAME.test(name)) throw new Error(`Invalid label name "${name}".`);
  return `{${entries.map(([name, value]) => `${name}="${escapeLabelValue(value)}"`).join(",")}}`;
}

function renderNumber(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}

/** The whole exposition, `# EOF` included. */
export function renderOpenMetrics(families: readonly MetricFamily[]): string {
  const lines: string[] = [];
  for (const family of families) {
    if (!NAME.test(family.name)) throw new Error(`Invalid metric name "${family.name}".`);
    lines.push(`# TYPE ${family.name} ${family.type}`);
    if (family.unit !== undefined) lines.push(`# UNIT ${family.name} ${family.unit}`);
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`);
    for (const sample of family.samples)
      lines.push(`${family.name}${renderLabels(sample.labels)} ${renderNumber(sample.value)}`);
  }
  lines.push("# EOF");
  return `${lines.join("\n")}\n`;
}
