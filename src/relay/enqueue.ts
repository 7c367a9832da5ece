import { count, queueUnits } from "../lib/meter";
import type { WorkMessage } from "../model/work-message";
import { databaseBindingIn } from "../sources/databases";

export interface SendOptions {
  /** The cron's re-drive sends it: its consumer runs the receipts one at a time, each leased (WorkMessage.redriven). */
  redriven?: boolean;
  /** The relay sends it: its first delivery grants each receipt's first lease (WorkMessage.relayGrant). */
  relayGrant?: boolean;
  /** A message of further deliveries to this route (WorkMessage.route). */
  route?: string;
}

/** Receipt ids per message: about 30 bytes each, so a message stays far below one 64 KB billing unit. */
export const RECEIPTS_PER_MESSAGE = 500;

/**
 * The one way work reaches the queue: relay, replay, re-drive and the consumer's own retries all call this. A
 * call sends one message per RECEIPTS_PER_MESSAGE receipts of one source, so a relay batch costs one queue write.
 * The receipts are in `env`'s database (each caller works in the database it found them in), and the message says
 * which: their consumer reads that one even if the source's `database` has changed since. With `route`, the message
 * carries those receipts' deliveries to that route alone (further deliveries, src/consumers/deliveries/deliveries.ts).
 */
export async function enqueueWork(
  env: Pick<Env, "WORK_QUEUE">,
  source: string,
  receiptIds: readonly string[],
  delaySeconds = 0,
  options: SendOptions = {},
): Promise<void> {
  const database = databaseBindingIn(env);
  const messages: WorkMessage[] = [];
  for (let start = 0; start < receiptIds.length; start += RECEIPTS_PER_MESSAGE) {
    const receiptIdsOfMessage = receiptIds.slice(start, start + RECEIPTS_PER_MESSAGE);
    messages.push({
      source,
      database,
      receiptIds: receiptIdsOfMessage,
      ...(options.redriven ? { redriven: true as const } : {}),
      ...(options.relayGrant && !options.redriven && options.route === undefined ? { relayGrant: true as const } : {}),
      ...(options.route === undefined ? {} : { route: options.route }),
    });
  }
  if (messages.length === 0) return;
  await env.WORK_QUEUE.sendBatch(
    messages.map((body) => ({ body, contentType: "json" as const })),
    delaySeconds > 0 ? { delaySeconds } : undefined,
  );
  for (const message of messages) count("queueOperations", queueUnits(message));
}

/** Receipts of several sources: grouped, one call per source. */
export async function enqueueReceipts(
  env: Pick<Env, "WORK_QUEUE">,
  receipts: readonly { source: string; receiptId: string }[],
  delaySeconds = 0,
  options: SendOptions = {},
): Promise<void> {
  const bySource = new Map<string, string[]>();
  for (const { source, receiptId } of receipts) bySource.set(source, [...(bySource.get(source) ?? []), receiptId]);
  for (const [source, receiptIds] of bySource) await enqueueWork(env, source, receiptIds, delaySeconds, options);
}
