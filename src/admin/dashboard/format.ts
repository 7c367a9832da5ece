/** How the dashboard writes times and durations: UTC instants, durations in the largest unit that reads well. */

export function formatInstant(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** A query string from the given values, leaving out empty ones and any name in `drop`. */
export function withQuery(
  path: string,
  query: Record<string, string | undefined>,
  set: Record<string, string> = {},
  drop: string[] = [],
): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query))
    if (value && !drop.includes(name) && !(name in set)) params.set(name, value);
  for (const [name, value] of Object.entries(set)) params.set(name, value);
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * An alert's facts as one line: `{baseline: 2, dead: 5, oldestAgeMs: 300000}` → "baseline 2 · dead 5 · oldest age
 * 5 min". Names are camelCase words; a name ending in Ms is a duration, in Bytes a size.
 */
export function formatFacts(facts: Record<string, number>): string {
  return Object.entries(facts)
    .map(([name, value]) => {
      const words = name
        .replace(/(Ms|Bytes)$/, "")
        .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
        .toLowerCase();
      const shown = name.endsWith("Ms")
        ? formatDuration(value)
        : name.endsWith("Bytes")
          ? formatBytes(value)
          : value.toLocaleString("en-US");
      return `${words} ${shown}`;
    })
    .join(" · ");
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GB`;
}
