import { count } from "./meter";
import { secretValue } from "./secrets";

/**
 * One JSON object per line, for Workers Logs. Callers pass named fields only: there is deliberately no way to
 * hand this a request, a header bag or a body, so secrets, signatures and payloads cannot reach a log line.
 */
export type LogValue = string | number | boolean | null | undefined;

/**
 * Whether routine successes are logged: a first accepted delivery and a processed attempt. Off unless
 * `LOG_SUCCESSES = "true"` (a var): those two lines are two Workers Logs lines per event ($0.60 per million beyond
 * the plan's 20 million a month, so $1.20 per million events) and say nothing the receipt does not — its status,
 * attempts and timeline are in D1, the admin API and the dashboard, and the Analytics Engine points count every
 * event. What needs a look always logs: duplicates, rejections, failures, retries (docs/performance.md, "What the figures decided").
 */
export function logsSuccesses(env: object): boolean {
  return secretValue(env, "LOG_SUCCESSES") === "true";
}

export function logEvent(event: string, fields: Record<string, LogValue>): void {
  count("logLines");
  console.log(JSON.stringify({ event, ...fields }));
}

export function logError(event: string, error: unknown, fields: Record<string, LogValue> = {}): void {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  count("logLines");
  console.error(JSON.stringify({ event, level: "error", error: message.slice(0, 500), ...fields }));
}
