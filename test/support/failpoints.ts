import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { ClaimShard } from "../../src/claims/shard";
import { type QueuedWork, receiptIdsOf } from "../../src/model/work-message";

/**
 * Real failures injected into the real pipeline: a claim shard whose D1 or queue binding fails the way the
 * platform's do, and D1 triggers that abort a statement inside a live transaction. Nothing here replaces our own
 * code or storage; it only takes away what the code depends on, the way an outage would.
 */

/** A D1 binding in the middle of an outage: every call fails the way D1 reports a lost connection. */
export function unreachableD1(): D1Database {
  const fail = () => {
    throw new Error("D1_ERROR: Network connection lost.");
  };
  return new Proxy({} as D1Database, { get: (_target, property) => (property === "then" ? undefined : fail) });
}

/** A queue binding that refuses every send. */
export function unreachableQueue(): Queue {
  const fail = async () => {
    throw new Error("Queue send failed: service unavailable");
  };
  return { send: fail, sendBatch: fail } as unknown as Queue;
}

/** The real queue, recording every receipt id sent through it (once per message that names it). */
export function countingQueue(real: Queue, sent: string[]): Queue {
  return {
    send: (body: QueuedWork, options?: QueueSendOptions) => {
      sent.push(...receiptIdsOf(body));
      return real.send(body, options);
    },
    sendBatch: (messages: Iterable<MessageSendRequest<QueuedWork>>, options?: QueueSendBatchOptions) => {
      const list = [...messages];
      sent.push(...list.flatMap((message) => receiptIdsOf(message.body)));
      return real.sendBatch(list, options);
    },
  } as unknown as Queue;
}

/** A queue that says yes and drops the message: the "sent but never delivered" case. */
export function lossyQueue(): Queue {
  return { send: async () => {}, sendBatch: async () => {} } as unknown as Queue;
}

/**
 * Swaps bindings inside one live claim shard instance (the DO keeps `env` on the instance), and returns a restore
 * function. Evicting the instance also restores it: a fresh instance is built with the real env.
 */
export async function breakShardBindings(
  stub: DurableObjectStub<ClaimShard>,
  broken: Partial<Env> | ((current: Env) => Partial<Env>),
): Promise<() => Promise<void>> {
  let original: Env | undefined;
  await runInDurableObject(stub, (instance: ClaimShard) => {
    const holder = instance as unknown as { env: Env };
    original = holder.env;
    holder.env = { ...holder.env, ...(typeof broken === "function" ? broken(holder.env) : broken) };
  });
  return async () => {
    await runInDurableObject(stub, (instance: ClaimShard) => {
      (instance as unknown as { env: Env }).env = original!;
    });
  };
}

/** Consecutive relay failures the shard has recorded (0 once a relay succeeds). */
export async function relayFailures(stub: DurableObjectStub<ClaimShard>): Promise<number> {
  return runInDurableObject(
    stub,
    (_instance: ClaimShard, state) =>
      state.storage.sql.exec<{ failures: number }>("SELECT failures FROM relay_state").toArray()[0]?.failures ?? 0,
  );
}

/**
 * A D1 trigger that aborts the statement marking matching receipts processed: the last statement of the
 * consumer's commit batch, after the handler's own writes. Returns a function that removes it.
 */
export async function failCommitFor(eventKeyPrefix: string): Promise<() => Promise<void>> {
  const trigger = `failpoint_commit_${eventKeyPrefix.replace(/[^a-z0-9_]/gi, "_")}`;
  await env.DB.prepare(
    `CREATE TRIGGER ${trigger} BEFORE UPDATE OF status ON receipts
     WHEN NEW.status = 'processed' AND NEW.event_key LIKE '${eventKeyPrefix.replace(/'/g, "''")}%'
     BEGIN SELECT RAISE(ABORT, 'injected failure before commit'); END`,
  ).run();
  return async () => {
    await env.DB.prepare(`DROP TRIGGER IF EXISTS ${trigger}`).run();
  };
}

/**
 * A D1 trigger that aborts any statement writing one receipt's `filtered_routes` (its fan-out): D1 failing inside the
 * fan-out's batch, for a reason other than the batch's own guard. Returns a function that removes it.
 */
export async function failFanOutOf(receiptId: string): Promise<() => Promise<void>> {
  const trigger = `failpoint_fan_out_${receiptId.replace(/[^a-z0-9_]/gi, "_")}`;
  await env.DB.prepare(
    `CREATE TRIGGER ${trigger} BEFORE UPDATE OF filtered_routes ON receipts
     WHEN NEW.id = '${receiptId.replace(/'/g, "''")}'
     BEGIN SELECT RAISE(ABORT, 'injected failure writing the fan-out'); END`,
  ).run();
  return async () => {
    await env.DB.prepare(`DROP TRIGGER IF EXISTS ${trigger}`).run();
  };
}
