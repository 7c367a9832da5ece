/**
 * One JSON object per line, for Workers Logs. Callers pass named fields only: there is deliberately no way to
 * hand this a request, a header bag or a body, so secrets, signatures and payloads cannot reach a log line.
 */
export type LogValue = string | number | boolean | null | undefined;

export function logEvent(event: string, fields: Record<string, LogValue>): void {
  console.log(JSON.stringify({ event, ...fields }));
}

export function logError(event: string, error: unknown, fields: Record<string, LogValue> = {}): void {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  console.error(JSON.stringify({ event, level: "error", error: message.slice(0, 500), ...fields }));
}
