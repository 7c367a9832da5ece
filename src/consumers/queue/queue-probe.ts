import { readCheckpoint, writeCheckpoint } from "../../db/checkpoints";
import type { QueueProbe } from "../../model/work-message";

/**
 * How far the consumer has come through the queue, for the cron's re-drive. Each cron run sends a probe, a message
 * naming no receipt, and the consumer records it once it has handled the batch it came in. A receipt whose message
 * was sent before a probe the consumer has handled should have been delivered by then; one whose message is still
 * behind an unhandled probe may only be waiting in a backlog. So the re-drive sends copies only of what was due
 * before the newest handled probe while the consumer is behind, and a backlog never gets a second message per
 * receipt. Costs: one queue message and one D1 row per cron run, nothing per event.
 */

const SENT = "queue-probe-sent";
const HANDLED = "queue-probe-handled";
/**
 * How long a probe may go unhandled before the consumer counts as behind (wall clock). Shorter than a cron interval
 * apart, two runs find the previous probe still on its way, which says nothing.
 */
export const PROBE_PATIENCE_MS = 2 * 60_000;

export interface ProbeState {
  /** The newest probe sent: its time in the run's clock, and the wall clock it was sent at. */
  sent: { sentAt: number; wallAt: number } | null;
  /** The newest probe the consumer has handled (its sending run's clock). */
  handled: { sentAt: number } | null;
}

/**
 * The latest relay or due time the re-drive may take as lost (run clock): unbounded unless the consumer is behind,
 * then the newest handled probe's time (nothing at all if it never handled one).
 */
export function redriveHorizon(state: ProbeState, wallNow: number): number {
  const { sent, handled } = state;
  if (sent === null) return Number.POSITIVE_INFINITY;
  if (handled !== null && handled.sentAt >= sent.sentAt) return Number.POSITIVE_INFINITY;
  if (wallNow - sent.wallAt < PROBE_PATIENCE_MS) return Number.POSITIVE_INFINITY;
  return handled?.sentAt ?? Number.NEGATIVE_INFINITY;
}

export async function readProbeState(env: Env): Promise<ProbeState> {
  const [sent, handled] = await Promise.all([
    readCheckpoint<{ sentAt: number; wallAt: number }>(env, "*", SENT),
    readCheckpoint<{ sentAt: number }>(env, "*", HANDLED),
  ]);
  return { sent, handled };
}

export async function sendProbe(env: Env, now: number): Promise<void> {
  const probe: QueueProbe = { probeSentAt: now };
  await env.WORK_QUEUE.send(probe, { contentType: "json" });
  await writeCheckpoint(env, "*", SENT, { sentAt: now, wallAt: Date.now() }, now);
}

/** Called after the batch the probes came in was handled (its retries sent). */
export async function recordProbesHandled(env: Env, probeTimes: readonly number[]): Promise<void> {
  if (probeTimes.length === 0) return;
  const sentAt = Math.max(...probeTimes);
  const previous = await readCheckpoint<{ sentAt: number }>(env, "*", HANDLED);
  if (previous && previous.sentAt >= sentAt) return;
  await writeCheckpoint(env, "*", HANDLED, { sentAt }, Date.now());
}
