import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { deliveryGate, gateName } from "../../src/gate/client";
import type { DeliveryControl } from "../../src/gate/control";
import { admit, EMPTY_GATE, release, SLOT_WAIT_FALLBACK_MS, WOKEN_SLOT_MS, wake } from "../../src/gate/decide";
import { ulid } from "../../src/lib/ulid";

/**
 * An in-flight-capped route keeps its cap busy (issue 37 §4): the release that frees a slot wakes the oldest delivery
 * waiting for one, instead of the slot standing idle until a held delivery looks again. Counts and states, not times.
 */

const capOne: DeliveryControl = { rateLimit: null, maxInFlight: 1, breaker: null, paused: false };
const options = { slotMs: 300_000, atOnce: 6 };

describe("a freed slot wakes the oldest delivery waiting for one", () => {
  it("reserves the freed slot for the oldest waiting delivery, which is then admitted though the cap is full", () => {
    const first = admit(EMPTY_GATE, capOne, ["r0", "r1", "r2"], 0, options);
    expect(first.admitted).toEqual(["r0"]);
    // Held for the slot, a delivery does not poll: it looks again on its own only after the fallback.
    expect(first.held).toEqual([
      { id: "r1", waitMs: SLOT_WAIT_FALLBACK_MS, reason: "max-in-flight" },
      { id: "r2", waitMs: SLOT_WAIT_FALLBACK_MS, reason: "max-in-flight" },
    ]);
    // Nothing is free while r0 runs.
    expect(wake(first.state, capOne, ["r1", "r2"], 5).woken).toEqual([]);
    const freed = release(first.state, capOne, [{ id: "r0", verdict: "success" }], 10).state;
    const woken = wake(freed, capOne, ["r1", "r2"], 10);
    expect(woken.woken).toEqual(["r1"]);
    expect(woken.state.inFlight).toEqual({ r1: 10 + WOKEN_SLOT_MS });
    // r1 arrives and goes; r2 still waits behind it.
    const arrived = admit(woken.state, capOne, ["r2", "r1"], 20, options);
    expect(arrived.admitted).toEqual(["r1"]);
    expect(arrived.held.map((hold) => hold.id)).toEqual(["r2"]);
    expect(arrived.state.inFlight).toEqual({ r1: 20 + options.slotMs });
  });

  it("wakes nobody while the route is paused or its breaker is open", () => {
    const freed = { ...EMPTY_GATE };
    expect(wake(freed, { ...capOne, paused: true }, ["r1"], 0).woken).toEqual([]);
    expect(wake({ ...freed, paused: true }, capOne, ["r1"], 0).woken).toEqual([]);
    expect(wake({ ...freed, openedAt: 0, lastProbeAt: 0 }, capOne, ["r1"], 0).woken).toEqual([]);
  });

  it("the gate answers a release with the oldest delivery held for a slot, once, and forgets it", async () => {
    const gate = deliveryGate(env, "gate-wake", `capped-${ulid(Date.now())}`);
    const name = gateName("gate-wake", "capped");
    const ids = [ulid(1_000), ulid(2_000), ulid(3_000)];
    const now = Date.now();
    const asked = await gate.admit(
      capOne,
      ids.map((id) => ({ id, database: "DB" })),
      now,
      options,
    );
    expect(asked.admitted).toEqual([ids[0]]);
    const { woken } = await gate.release(capOne, [{ id: ids[0]!, verdict: "success" }], now + 1, name);
    expect(woken).toEqual([{ id: ids[1], database: "DB" }]);
    // The woken delivery arrives and is admitted; the next release wakes the one after it, and then nobody.
    expect((await gate.admit(capOne, [{ id: ids[1]!, database: "DB" }], now + 2, options)).admitted).toEqual([ids[1]]);
    expect((await gate.release(capOne, [{ id: ids[1]!, verdict: "success" }], now + 3, name)).woken).toEqual([
      { id: ids[2], database: "DB" },
    ]);
    expect((await gate.admit(capOne, [{ id: ids[2]!, database: "DB" }], now + 4, options)).admitted).toEqual([ids[2]]);
    expect((await gate.release(capOne, [{ id: ids[2]!, verdict: "success" }], now + 5, name)).woken).toEqual([]);
  });
});
