// What `listen` does with one delivery: post it to the local server as the receiver signed it, time the answer, and
// print one line for it. The body is never printed here: `echo` is the tool for looking inside deliveries.
import { clock, dim, duration, printable } from "../format.mjs";

/** Longer than any forward_timeout (5 minutes at most): past it the hub has already given up on the answer. */
const LOCAL_TIMEOUT_MS = 300_000;

/**
 * @param {string} target
 * @param {{ headers: Record<string, string>, body: string }} delivery
 * @returns {Promise<{ status: number, latencyMs: number } | { error: string, latencyMs: number }>}
 */
export async function deliverLocally(target, delivery) {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  try {
    const response = await fetch(target, {
      method: "POST",
      headers: delivery.headers,
      body: Buffer.from(delivery.body, "base64"),
      redirect: "manual",
      signal: AbortSignal.timeout(LOCAL_TIMEOUT_MS),
    });
    await response.body?.cancel();
    return { status: response.status, latencyMs: latency() };
  } catch (error) {
    const cause = /** @type {{ cause?: { code?: string } }} */ (error).cause?.code;
    return { error: cause ?? /** @type {Error} */ (error).message, latencyMs: latency() };
  }
}

/** A forwarded key or type that is no plain header value arrives percent-encoded under "<name>-encoded". */
function eventHeader(/** @type {Record<string, string>} */ headers, /** @type {string} */ name) {
  const encoded = headers[`${name}-encoded`];
  if (!encoded) return headers[name] ?? "";
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}

/**
 * `12:00:01.234  account.credited evt_1  → 200 in 12 ms  (delivery 01J…)`
 * @param {{ headers: Record<string, string> }} delivery
 * @param {{ status: number, latencyMs: number } | { error: string, latencyMs: number }} result
 */
export function eventLine(delivery, result) {
  const type = eventHeader(delivery.headers, "x-webhook-event-type");
  const key = eventHeader(delivery.headers, "x-webhook-event-key");
  const answer =
    "status" in result
      ? `→ ${result.status} in ${duration(result.latencyMs)}`
      : `→ not delivered: ${printable(result.error)} (after ${duration(result.latencyMs)})`;
  return `${clock(Date.now())}  ${type ? `${printable(type)} ` : ""}${printable(key)}  ${answer}  ${dim(`(delivery ${printable(delivery.headers["webhook-id"])})`)}`;
}

/**
 * What waited while nobody listened, as the hub lists it on connecting.
 * @param {{ waitingCount: number, waiting: { source: string, eventKey: string, eventType: string | null, since: number }[] }} connected
 */
export function waitingLines(connected) {
  if (connected.waitingCount === 0) return ["  nothing waiting"];
  const lines = [`  ${connected.waitingCount} waiting from while nobody listened (each comes as its retry falls due):`];
  for (const waiting of connected.waiting)
    lines.push(
      `    since ${clock(waiting.since)}  ${printable(waiting.source)} ${waiting.eventType ? `${printable(waiting.eventType)} ` : ""}${printable(waiting.eventKey)}`,
    );
  const more = connected.waitingCount - connected.waiting.length;
  if (more > 0) lines.push(`    … and ${more} more`);
  return lines;
}
