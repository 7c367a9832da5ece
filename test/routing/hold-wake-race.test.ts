import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import { admitDeliveries, type DeliveryToAdmit } from "../../src/consumers/gate/delivery-gate";
import { releaseDeliveries } from "../../src/consumers/gate/delivery-release";
import { processBatch } from "../../src/consumers/receipts/process";
import { database } from "../../src/db/client";
import type { QueuedWork } from "../../src/model/work-message";
import { loadSources } from "../../src/sources/registry";
import { receiptRow, seedFurtherDelivery, seedReceipt } from "../consumers/support/processing";
import { deliveryRow, recordingQueue } from "./gate-support";

/**
 * The hold and the wake of one delivery on a max_in_flight = 1 route, in the order that races (issue 37 §4): consumer
 * A asks the gate about X while W holds the slot and is told to wait; before A writes X's due time, B's release of W
 * frees the slot, the gate wakes X (its slot reserved for it) and B makes X due now. A's write lands last. It must not
 * push X back: the reserved slot would sit idle until its reservation lapsed. Real D1 and the real gate; A's write is
 * held back (a slow D1 write, nothing else changed) until B's wake has been written, so the order is the racing one.
 */

/** The real D1, but its first UPDATE of `table` waits for `letGo`: a consumer whose write lands late. */
function lateWrite(binding: D1Database, table: string) {
  let reached!: () => void;
  let letGo!: () => void;
  const writing = new Promise<void>((resolve) => (reached = resolve));
  const mayGo = new Promise<void>((resolve) => (letGo = resolve));
  let held = false;
  const late = (statement: D1PreparedStatement): D1PreparedStatement =>
    ({
      bind: (...values: unknown[]) => late(statement.bind(...values)),
      run: async () => {
        reached();
        await mayGo;
        return statement.run();
      },
    }) as unknown as D1PreparedStatement;
  const db = new Proxy(binding, {
    get(target, property) {
      if (property !== "prepare") return Reflect.get(target, property).bind(target);
      return (query: string) => {
        const statement = target.prepare(query);
        if (held || !query.toLowerCase().startsWith(`update "${table}"`)) return statement;
        held = true;
        return late(statement);
      };
    },
  });
  return { db, writing, letGo };
}

const cases = [
  {
    row: "receipt" as const,
    source: "gate-capped-one",
    table: "receipts",
    seed: (source: string) => seedReceipt({ source, payload: { type: "account.credited", data: {} } }),
    dueAt: async (receiptId: string) => (await receiptRow(receiptId)).nextAttemptAt,
    run: (runEnv: Env, receiptId: string) => processBatch(runEnv, [receiptId]),
  },
  {
    row: "delivery" as const,
    source: "gate-fanout-capped-one",
    table: "deliveries",
    seed: (source: string) =>
      seedFurtherDelivery({
        source,
        payload: { type: "account.credited", data: {} },
        ownRoute: "plain",
        route: "capped",
      }),
    dueAt: async (receiptId: string) => (await deliveryRow(receiptId, "capped"))!.nextAttemptAt,
    run: (runEnv: Env, receiptId: string) => processDeliveries(runEnv, "capped", [receiptId]),
  },
];

describe("a hold written after a release woke the same delivery", () => {
  for (const { row, source, table, seed, dueAt, run } of cases)
    it(`leaves it due now, so it runs in the slot reserved for it (${row} row)`, { timeout: 120_000 }, async () => {
      const sent: QueuedWork[] = [];
      const queueEnv = { ...env, WORK_QUEUE: recordingQueue(sent) };
      const toAdmit = (receiptId: string): DeliveryToAdmit => ({
        receiptId,
        source,
        config: loadSources(env).get(source),
        route: "capped",
        row,
      });
      const [inFlight, waiting] = [toAdmit(await seed(source)), toAdmit(await seed(source))];
      // W takes the route's one slot.
      expect((await admitDeliveries(env, database(env), [inFlight], Date.now(), 1)).size).toBe(0);

      // A asks about X: held for the slot; its due-time write waits.
      const a = lateWrite(env.DB, table);
      const askedAt = Date.now();
      const held = admitDeliveries(env, database({ DB: a.db }), [waiting], askedAt, 1);
      await a.writing;
      // B's release of W frees the slot and wakes X: due now, sent on (its message recorded).
      await releaseDeliveries(queueEnv, [{ ...inFlight, result: { status: "processed" } }], Date.now());
      expect(sent.flatMap((message) => ("receiptIds" in message ? message.receiptIds : []))).toEqual([
        waiting.receiptId,
      ]);
      // A's hold lands last.
      a.letGo();
      expect([...(await held).values()]).toEqual([{ kind: "retry", delaySeconds: expect.any(Number) }]);

      // Before: X due again at A's hold (its slot reserved and idle meanwhile); its wake's message found it not due.
      expect(await dueAt(waiting.receiptId)).toBeLessThanOrEqual(Date.now());
      expect((await run(queueEnv, waiting.receiptId)).get(waiting.receiptId)).toEqual({
        kind: "done",
        status: "processed",
      });
    });
});
