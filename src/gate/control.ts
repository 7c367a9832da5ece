/**
 * Delivery control of a route (docs/routing.md "Delivery control"): how fast and how many at once its destination
 * is sent to, whether a run of failures holds its deliveries, and whether it is paused. Read once when config loads;
 * a route that sets none of these has no control at all (null), and its deliveries never consult the gate.
 */

export interface RateLimit {
  count: number;
  windowMs: number;
  /** As written in config, for messages. */
  text: string;
}

export interface CircuitBreaker {
  /** Consecutive failed attempts that open it. */
  failures: number;
  /** While open, one probe delivery is let through per interval. */
  probeIntervalMs: number;
}

export interface DeliveryControl {
  rateLimit: RateLimit | null;
  maxInFlight: number | null;
  breaker: CircuitBreaker | null;
  /** Paused in config: held until the config says otherwise (the admin pause is the gate's own state). */
  paused: boolean;
  /**
   * `recover = "auto"`: when the breaker closes again, the deliveries that died while it was failing are replayed as one
   * job (src/replay/route-recovery.ts). Needs a circuit breaker; off by default.
   */
  recover?: boolean;
}

/** The route options this module reads. */
export const CONTROL_KEYS = ["rate_limit", "max_in_flight", "circuit_breaker", "paused", "recover"] as const;

export const DEFAULT_BREAKER_FAILURES = 10;
export const DEFAULT_PROBE_INTERVAL_MS = 30_000;
/** The gate remembers one timestamp per admission in the window: bounded, so its state stays one small value. */
export const MAX_RATE_COUNT = 1000;
const MAX_IN_FLIGHT = 1000;
const RATE_UNITS: Record<string, number> = {
  s: 1000,
  sec: 1000,
  second: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
};
const RATE = /^(\d+)\s*\/\s*([a-z]+)$/;
const PROBE_INTERVAL = /^(\d+)\s*(s|m|h)$/;
const BREAKER_KEYS = new Set(["failures", "probe_interval"]);

/** The route's control, or null when it sets none; each problem is pushed, prefixed with `where`. */
export function parseDeliveryControl(
  table: Record<string, unknown>,
  where: string,
  problems: string[],
): DeliveryControl | null {
  if (CONTROL_KEYS.every((key) => table[key] === undefined)) return null;
  return {
    rateLimit: table.rate_limit === undefined ? null : parseRateLimit(table.rate_limit, where, problems),
    maxInFlight: table.max_in_flight === undefined ? null : parseMaxInFlight(table.max_in_flight, where, problems),
    breaker: table.circuit_breaker === undefined ? null : parseBreaker(table.circuit_breaker, where, problems),
    paused: parsePaused(table.paused, where, problems),
    recover: parseRecover(table, where, problems),
  };
}

function parseRecover(table: Record<string, unknown>, where: string, problems: string[]): boolean {
  const value = table.recover;
  if (value === undefined || value === "off") return false;
  if (value !== "auto") {
    problems.push(`${where}: recover must be "auto" or "off" (got ${JSON.stringify(value)})`);
    return false;
  }
  if (table.circuit_breaker === undefined) {
    problems.push(
      `${where}: recover = "auto" re-drives what died while the circuit breaker was open: set circuit_breaker too`,
    );
    return false;
  }
  return true;
}

function parseRateLimit(value: unknown, where: string, problems: string[]): RateLimit | null {
  const match = typeof value === "string" ? RATE.exec(value.trim()) : null;
  const unitMs = match ? RATE_UNITS[match[2]!] : undefined;
  const count = match ? Number(match[1]) : 0;
  if (!match || unitMs === undefined || count < 1 || count > MAX_RATE_COUNT) {
    problems.push(
      `${where}: rate_limit must be "<count>/<s|min|h>" with a count from 1 to ${MAX_RATE_COUNT}, such as "20/s" or "600/min" (got ${JSON.stringify(value)})`,
    );
    return null;
  }
  return { count, windowMs: unitMs, text: value as string };
}

function parseMaxInFlight(value: unknown, where: string, problems: string[]): number | null {
  if (typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= MAX_IN_FLIGHT) return value;
  problems.push(
    `${where}: max_in_flight must be a whole number from 1 to ${MAX_IN_FLIGHT} (got ${JSON.stringify(value)})`,
  );
  return null;
}

function parseBreaker(value: unknown, where: string, problems: string[]): CircuitBreaker | null {
  if (value === true) return { failures: DEFAULT_BREAKER_FAILURES, probeIntervalMs: DEFAULT_PROBE_INTERVAL_MS };
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    problems.push(
      `${where}: circuit_breaker must be true or a table { failures = <n>, probe_interval = "30s" } (got ${JSON.stringify(value)})`,
    );
    return null;
  }
  const table = value as Record<string, unknown>;
  let valid = true;
  for (const key of Object.keys(table)) {
    if (!BREAKER_KEYS.has(key)) {
      problems.push(
        `${where}: unknown circuit_breaker option ${JSON.stringify(key)} (it takes failures, probe_interval)`,
      );
      valid = false;
    }
  }
  const failures = table.failures ?? DEFAULT_BREAKER_FAILURES;
  if (typeof failures !== "number" || !Number.isInteger(failures) || failures < 1 || failures > 1000) {
    problems.push(
      `${where}: circuit_breaker.failures must be a whole number from 1 to 1000 (got ${JSON.stringify(failures)})`,
    );
    valid = false;
  }
  const interval =
    table.probe_interval === undefined
      ? null
      : typeof table.probe_interval === "string"
        ? PROBE_INTERVAL.exec(table.probe_interval.trim())
        : null;
  const probeIntervalMs = interval
    ? Number(interval[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[interval[2] as "s" | "m" | "h"]
    : DEFAULT_PROBE_INTERVAL_MS;
  if (table.probe_interval !== undefined && (!interval || probeIntervalMs < 1000 || probeIntervalMs > 12 * 3_600_000)) {
    problems.push(
      `${where}: circuit_breaker.probe_interval must be a duration from "1s" to "12h", such as "30s" or "5m" (got ${JSON.stringify(table.probe_interval)})`,
    );
    valid = false;
  }
  return valid ? { failures: failures as number, probeIntervalMs } : null;
}

function parsePaused(value: unknown, where: string, problems: string[]): boolean {
  if (value === undefined || typeof value === "boolean") return value === true;
  problems.push(`${where}: paused must be true or false (got ${JSON.stringify(value)})`);
  return false;
}
