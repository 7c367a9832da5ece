const DAY_MS = 86_400_000;

/**
 * "90s", "15m", "1h", "7d" → milliseconds (a bare number is seconds); null when it is none of those. The one
 * reading of a duration setting, for the source table (src/sources/config.ts), the admin filters and an adapter's
 * own options (src/providers/aws-sns.ts `max_age`), which cannot import the source config.
 */
export function parseDuration(value: unknown): number | null {
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return value * 1000;
  if (typeof value !== "string") return null;
  const match = /^(\d+)\s*(ms|s|m|h|d)$/.exec(value.trim());
  if (!match) return null;
  const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS }[match[2] as "ms" | "s" | "m" | "h" | "d"];
  return Number(match[1]) * unitMs;
}
