/** How the dashboard writes times and durations: UTC instants, durations in the largest unit that reads well. */

export function formatInstant(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** A query string from the given values, leaving out empty ones and any name in `drop`. */
export function withQuery(path: string, query: Record<string, string | undefined>, set: Record<string, string> = {}, drop: string[] = []): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value && !drop.includes(name) && !(name in set)) params.set(name, value);
  for (const [name, value] of Object.entries(set)) params.set(name, value);
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}
