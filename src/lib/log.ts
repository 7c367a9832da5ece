import { secretValue } from "./secrets";

/**
 * One JSON object per line, for Workers Logs. Callers pass named fields only: there is deliberately no way to
 * hand this a request, a header bag or a body, so secrets, signatures and payloads cannot reach a log line.
 */
export type LogValue = string | number | boolean | null | undefined;

/**
 * Whether routine successes are logged: a first accepted delivery and a processed attempt. On by default;
 * `LOG_SUCCESSES = "false"` (a var) leaves only what needs a look — duplicates, rejections, failures, retries —
 * for deployments where a line per event is more log volume (and, locally, more CPU) than it is worth. The
 * receipt in D1 and the Analytics Engine metrics still record every event.
 */
export function logsSuccesses(env: object): boolean {
  return secretValue(env, "LOG_SUCCESSES") !== "false";
}

export function logEvent(event: string, fields: Record<string, LogValue>): void {
  console.log(JSON.stringify({ event, ...fields }));
}

export function logError(event: string, error: unknown, fields: Record<string, LogValue> = {}): void {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  console.error(JSON.stringify({ event, level: "error", error: message.slice(0, 500), ...fields }));
}
