import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { relaySettings } from "../../src/claims/relay-settings";
import { relayDelayForClaim } from "../../src/claims/relay-timing";
import { shardFor } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { receiptIdsOf } from "../../src/model/work-message";
import { credit, deliverDemo, eventually } from "../support/deliveries";
import { keysInOneShard, settle, settleEachTest } from "../support/storage";

/**
 * The adaptive relay (src/claims/relay-timing.ts): a claim at an idle shard is relayed at once, claims that arrive
 * while a relay runs gather for the window. Read from the alarms the shard itself sets, each as a delay from the
 * moment it set it, and from the relays it makes: counts, never timings. Deployed, a Durable Object's clock stands
 * still while its code runs; local workerd's may tick a millisecond between the shard's read and the recorder's, so
 * each delay is read in whole windows (0 = due at once, 1 = one window): the two outcomes the relay chooses between
 * are a window apart.
 */

const GATHER_MS = relaySettings(env).delayMs;

/** Each recorded alarm delay in gathering windows, rounded: a tick of the local clock does not move it. */
const inWindows = (delays: readonly number[]) => delays.map((delay) => Math.round(delay / GATHER_MS));

/** A fresh instance of the keys' shard that records every relay alarm it sets, as a delay from when it was set. */
async function recordingShard(keys: readonly string[]) {
  const shard = shardFor(env, "demo", keys[0]!);
  // Started, then evicted: whatever it relayed before is forgotten, as after any eviction.
  await runInDurableObject(shard, () => {});
  await evictDurableObject(shard);
  const alarmDelays: number[] = [];
  await runInDurableObject(shard, (instance: ClaimShard, state) => {
    const storage = new Proxy(state.storage, {
      get(target, property) {
        if (property === "setAlarm") {
          return (scheduledTime: number | Date, options?: DurableObjectSetAlarmOptions) => {
            alarmDelays.push(Number(scheduledTime) - Date.now());
            return target.setAlarm(scheduledTime, options);
          };
        }
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const ctx = new Proxy(state, {
      get(target, property) {
        if (property === "storage") return storage;
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    (instance as unknown as { ctx: DurableObjectState }).ctx = ctx;
  });
  return { shard, alarmDelays };
}

/**
 * The real queue behind a latch: each relay's send waits until `release()`, so a relay stays in flight while the
 * test delivers more. `batches` lists the receipt ids of each relay's send. The wait polls a flag rather than
 * awaiting a promise of the test's, which the shard's own request context could not resolve.
 */
function latchedQueue(real: Queue) {
  const state = { released: false, batches: [] as string[][] };
  const queue = {
    send: () => Promise.reject(new Error("the relay sends in batches")),
    sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
      const list = [...messages];
      state.batches.push(list.flatMap((message) => receiptIdsOf(message.body as never)));
      while (!state.released) await new Promise((resolve) => setTimeout(resolve, 10));
      return real.sendBatch(list, options);
    },
  } as unknown as Queue;
  return { queue, state, release: () => (state.released = true) };
}

settleEachTest();

describe("the adaptive relay", () => {
  it("sets the alarm for now for a claim at an idle shard, for the window for one at a busy shard, never longer", () => {
    const held = { gatherMs: 3000, fullBatchWaits: false };
    expect(relayDelayForClaim({ ...held, now: 10_000, lastRelayEndedAt: null })).toBe(0);
    expect(relayDelayForClaim({ ...held, now: 10_000, lastRelayEndedAt: 6_000 })).toBe(0);
    expect(relayDelayForClaim({ ...held, now: 10_000, lastRelayEndedAt: 7_000 })).toBe(0);
    expect(relayDelayForClaim({ ...held, now: 10_000, lastRelayEndedAt: 9_000 })).toBe(2_000);
    expect(relayDelayForClaim({ ...held, now: 10_000, lastRelayEndedAt: 10_000 })).toBe(3_000);
    // A clock that went back never stretches the wait past the window.
    expect(relayDelayForClaim({ ...held, now: 10_000, lastRelayEndedAt: 12_000 })).toBe(3_000);
    // The bench's held-back receiver holds every claim the whole window.
    expect(relayDelayForClaim({ gatherMs: 3_600_000, fullBatchWaits: true, now: 10_000, lastRelayEndedAt: null })).toBe(
      3_600_000,
    );
  });

  it("relays a lone event at once: the shard's alarm is due the moment the claim is stored", async () => {
    const [eventKey] = keysInOneShard("msg_lone_relay", 1);
    const { alarmDelays } = await recordingShard([eventKey!]);
    expect((await deliverDemo(eventKey!, credit("acct_lone_relay", 1))).status).toBe(200);
    await settle();
    expect(inWindows(alarmDelays)).toEqual([0]);
  });

  it("gathers the claims that arrive while a relay runs into one batch, relayed a window later", async () => {
    const keys = keysInOneShard("msg_gather_relay", 20);
    const { shard, alarmDelays } = await recordingShard(keys);
    const latch = latchedQueue(env.WORK_QUEUE);
    await runInDurableObject(shard, (instance: ClaimShard) => {
      const holder = instance as unknown as { env: Env };
      holder.env = { ...holder.env, WORK_QUEUE: latch.queue };
    });

    expect((await deliverDemo(keys[0]!, credit("acct_gather_relay", 1))).status).toBe(200);
    await eventually(async () => (latch.state.batches.length > 0 ? true : undefined), 15_000, "the first relay");
    const answers = await Promise.all(keys.slice(1).map((key) => deliverDemo(key, credit("acct_gather_relay", 1))));
    expect(answers.map((answer) => answer.status)).toEqual(keys.slice(1).map(() => 200));
    latch.release();
    await settle();

    // Two relays for twenty claims: the lone first at once, the nineteen that came during it together.
    expect(latch.state.batches.map((batch) => batch.length)).toEqual([1, keys.length - 1]);
    expect(inWindows(alarmDelays)).toEqual([0, 1]);
  });
});
