import { describe, expect, it } from "vitest";
import type { DeliveryControl } from "../../src/gate/control";
import { admit, EMPTY_GATE, type GateState, PAUSED_RECHECK_MS, RATE_GUARD_MS, release } from "../../src/gate/decide";

/** The gate's decisions (src/gate/decide.ts), as the pure functions they are: state, control and time in, answer out. */

const none: DeliveryControl = { rateLimit: null, maxInFlight: null, breaker: null, paused: false };
const options = { slotMs: 60_000, atOnce: 6 };
const ids = (n: number, prefix = "r") => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe("the gate's decisions", () => {
  it("admits at most max_in_flight at once, in the order given, and frees a slot on release or when it expires", () => {
    const control = { ...none, maxInFlight: 2 };
    const first = admit(EMPTY_GATE, control, ids(4), 0, options);
    expect(first.admitted).toEqual(["r0", "r1"]);
    expect(first.held.map((hold) => [hold.id, hold.reason])).toEqual([
      ["r2", "max-in-flight"],
      ["r3", "max-in-flight"],
    ]);
    const freed = release(first.state, control, [{ id: "r0", verdict: "success" }], 10).state;
    expect(admit(freed, control, ["r2", "r3"], 20, options).admitted).toEqual(["r2"]);
    // Nobody released r1 and r2: their holders died; the slots expire after slotMs.
    const later = admit(
      admit(freed, control, ["r2"], 20, options).state,
      control,
      ["r3"],
      20 + options.slotMs,
      options,
    );
    expect(later.admitted).toEqual(["r3"]);
  });

  it("admits at most the rate limit in any window (plus the guard), and says when the window has room", () => {
    const control = { ...none, rateLimit: { count: 3, windowMs: 1000, text: "3/s" } };
    const first = admit(EMPTY_GATE, control, ids(5), 0, options);
    expect(first.admitted).toEqual(["r0", "r1", "r2"]);
    // Its turn is 1000 + RATE_GUARD_MS away: it comes straight back, by its turn, to a consumer that paces it.
    expect(first.held[0]).toEqual({ id: "r3", waitMs: 0, reason: "rate-limit" });
    expect(admit(first.state, control, ["r3"], 1000 + RATE_GUARD_MS - 1, options).admitted).toEqual([]);
    expect(admit(first.state, control, ["r3", "r4", "r5", "r6"], 1000 + RATE_GUARD_MS, options).admitted).toEqual([
      "r3",
      "r4",
      "r5",
    ]);
    // Never more than what the consumer starts at once, so admission and send stay close.
    expect(
      admit(EMPTY_GATE, { ...none, rateLimit: { count: 100, windowMs: 1000, text: "100/s" } }, ids(10), 0, options)
        .admitted,
    ).toHaveLength(6);
  });

  it("holds everything while paused, in config or from the admin API", () => {
    expect(admit(EMPTY_GATE, { ...none, paused: true }, ids(2), 0, options).held).toEqual([
      { id: "r0", waitMs: PAUSED_RECHECK_MS, reason: "paused" },
      { id: "r1", waitMs: PAUSED_RECHECK_MS, reason: "paused" },
    ]);
    expect(admit({ ...EMPTY_GATE, paused: true }, none, ids(1), 0, options).admitted).toEqual([]);
  });

  it("opens the breaker after N failures in a row, lets one probe through per interval, and closes on a success", () => {
    const control = { ...none, breaker: { failures: 3, probeIntervalMs: 10_000 } };
    let state: GateState = EMPTY_GATE;
    const fail = (id: string, at: number) => release(state, control, [{ id, verdict: "failure" }], at);
    expect(fail("a", 0).transition).toBeNull();
    state = fail("a", 0).state;
    state = release(state, control, [{ id: "x", verdict: "neutral" }], 0).state; // a dead letter of the event's own says nothing
    state = fail("b", 1).state;
    const opened = fail("c", 2);
    expect(opened.transition).toBe("opened");
    state = opened.state;
    expect(admit(state, control, ids(2), 5, options).held.map((hold) => hold.reason)).toEqual([
      "circuit-open",
      "circuit-open",
    ]);
    const probing = admit(state, control, ids(3), 2 + 10_000, options);
    expect(probing.admitted).toEqual(["r0"]);
    expect(probing.held.map((hold) => hold.reason)).toEqual(["circuit-open", "circuit-open"]);
    // The probe fails: still open, and the next probe waits a whole interval.
    const stillOpen = release(probing.state, control, [{ id: "r0", verdict: "failure" }], 10_100);
    expect(stillOpen.transition).toBeNull();
    expect(admit(stillOpen.state, control, ["r1"], 10_100, options).admitted).toEqual([]);
    const secondProbe = admit(stillOpen.state, control, ["r1"], 2 + 20_000, options);
    expect(secondProbe.admitted).toEqual(["r1"]);
    const closed = release(secondProbe.state, control, [{ id: "r1", verdict: "success" }], 20_100);
    expect(closed.transition).toBe("closed");
    expect(admit(closed.state, control, ids(4), 20_200, options).admitted).toEqual(ids(4));
  });

  it("a success between failures starts the count again", () => {
    const control = { ...none, breaker: { failures: 2, probeIntervalMs: 10_000 } };
    const once = release(
      EMPTY_GATE,
      control,
      [
        { id: "a", verdict: "failure" },
        { id: "b", verdict: "success" },
        { id: "c", verdict: "failure" },
      ],
      0,
    );
    expect(once).toMatchObject({ transition: null, state: { failures: 1, openedAt: null } });
  });

  it("a breaker the config no longer has closes, and says so once, so its open alert resolves", () => {
    const withBreaker = { ...none, breaker: { failures: 1, probeIntervalMs: 10_000 } };
    const opened = release(EMPTY_GATE, withBreaker, [{ id: "a", verdict: "failure" }], 0);
    expect(opened.transition).toBe("opened");
    // A deploy removed `circuit_breaker`: the next finished attempt reports the close the alert waits for.
    const closed = release(opened.state, none, [{ id: "b", verdict: "neutral" }], 1000);
    expect(closed).toMatchObject({ transition: "closed", state: { openedAt: null, failures: 0 } });
    expect(release(closed.state, none, [{ id: "c", verdict: "success" }], 2000).transition).toBeNull();
  });
});
