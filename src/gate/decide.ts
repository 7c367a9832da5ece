import type { DeliveryControl } from "./control";

/**
 * The gate's decisions, as pure functions of its state, the route's control and the time: which deliveries may go
 * now, how long the others wait, and what an attempt's outcome does to the circuit breaker. No I/O here: the
 * Durable Object (gate.ts) only stores what these return.
 */

export interface GateState {
  /** Paused from the admin API or CLI (a pause in config is the control's own). */
  paused: boolean;
  /**
   * Under a rate limit, by when each admitted delivery's send will have left (its start, plus the margin its start may
   * slip by: RATE_GUARD_MS or PACED_SEND_MARGIN_MS), earliest first, for those still inside the window.
   */
  admissions: number[];
  /** Deliveries admitted and not yet released → when their slot expires (their consumer died). */
  inFlight: Record<string, number>;
  /** Failed attempts in a row. */
  failures: number;
  /** When the breaker opened; null while it is closed. */
  openedAt: number | null;
  /** When the open breaker last let a probe through. */
  lastProbeAt: number | null;
  /** The probe in flight, if any, and when its slot expires. */
  probe: { id: string; expiresAt: number } | null;
  /**
   * When the current run of failures began (its first failed attempt); absent while none is counted, so a gate that
   * never fails stores what it always stored. A route's recovery replays what died from then on.
   */
  failingSince?: number;
  /** The latest recovery a closing breaker started (src/replay/route-recovery.ts): its job, for the admin API. */
  recovery?: { jobKey: string; startedAt: number };
}

export const EMPTY_GATE: GateState = {
  paused: false,
  admissions: [],
  inFlight: {},
  failures: 0,
  openedAt: null,
  lastProbeAt: null,
  probe: null,
};

export type HoldReason = "paused" | "circuit-open" | "max-in-flight" | "rate-limit";

export interface Admission {
  state: GateState;
  admitted: string[];
  /**
   * Admitted deliveries that may start only later (a rate limit's next send time, within `reserveMs`): id → that time.
   * Their consumer waits for it in-process and sends then; one that cannot start by then + PACED_SEND_MARGIN_MS does
   * not start at all (src/consumers/attempt/attempt-slots.ts).
   */
  startAt: Record<string, number>;
  held: { id: string; waitMs: number; reason: HoldReason }[];
}

/** How long a paused route's deliveries wait before they look again (a resume sends them at once, in order). */
export const PAUSED_RECHECK_MS = 15 * 60_000;
/** A delivery held for the next probe or a consumer's next batch looks again after the queue's shortest delay. */
export const IN_FLIGHT_RECHECK_MS = 1000;
/**
 * A delivery held for a free slot under max_in_flight is woken by the release that frees one (`wake`), so it does not
 * poll; it looks again on its own only after this long, should the slot's holder have died (its slot expires after
 * the lease time) or the wake's message have been lost.
 */
export const SLOT_WAIT_FALLBACK_MS = 60_000;
/**
 * How long a slot reserved for a woken delivery waits for it to arrive: long enough for its message, short enough
 * that a wake which never arrives (its delivery finished meanwhile) does not keep the route's slot for a lease time.
 */
export const WOKEN_SLOT_MS = 30_000;
/**
 * A delivery admitted to go now reaches its destination a little after its admission (its consumer still takes a lease
 * and builds the request), and not always equally soon: it counts as sent until this long after, so spacing the next
 * sends a window after that keeps what the destination sees within the limit even when one send is slower to leave.
 */
export const RATE_GUARD_MS = 250;
/**
 * A delivery given a later start (`startAt`) has its lease and request ready and leaves when its wait ends: it counts
 * as sent until this long after its start, and its consumer does not send it at all once that has passed, so a backlog
 * under a rate limit moves at `count` per window + this margin.
 */
export const PACED_SEND_MARGIN_MS = 100;
/**
 * How long a message sent back on the queue with no delay takes to be consumed again, at most, when the consumer is
 * free (a batch timeout of 0.25 s, and the send): what a delivery held under a rate limit is due back ahead of its turn.
 */
export const QUEUE_RETURN_MS = 500;

export interface AdmitOptions {
  /** How long an admitted delivery's slot lasts if it is never released (its consumer died): the lease time. */
  slotMs: number;
  /** At most this many admitted to go now per call under a rate limit: what the consumer starts at once. */
  atOnce: number;
  /**
   * Under a rate limit, how far ahead a delivery may be given a later start instead of being held (its consumer waits
   * that long in-process): 0 or absent, never (a caller that cannot wait before its send).
   */
  reserveMs?: number;
}

/** Admits `ids` in the order given (received order), each while the route's limits allow; the rest wait. */
export function admit(
  previous: GateState,
  control: DeliveryControl,
  ids: readonly string[],
  now: number,
  options: AdmitOptions,
): Admission {
  const state = liveState(previous, control, now);
  const admitted: string[] = [];
  const startAt: Record<string, number> = {};
  const held: Admission["held"] = [];
  let admittedNow = 0;
  // When the caller sends its held deliveries back on the queue: once its last paced send has started.
  let sendsBackAt = now;
  for (const id of ids) {
    // A delivery woken by a freed slot (`wake`) already holds it: the cap does not count it twice.
    const holdsSlot = id in state.inFlight;
    const wait = holdFor(state, control, now, admittedNow, options, holdsSlot, sendsBackAt);
    if (wait) {
      held.push({ id, ...wait });
      continue;
    }
    admitted.push(id);
    if (control.rateLimit) {
      const at = nextSendAt(state.admissions, control.rateLimit, now);
      if (at > now) {
        startAt[id] = at;
        sendsBackAt = Math.max(sendsBackAt, at);
      } else admittedNow += 1;
      insertSorted(state.admissions, at > now ? at + PACED_SEND_MARGIN_MS : now + RATE_GUARD_MS);
    }
    if (state.openedAt !== null) {
      state.probe = { id, expiresAt: now + options.slotMs };
      state.lastProbeAt = now;
    } else if (control.maxInFlight !== null) {
      state.inFlight[id] = now + options.slotMs;
    }
  }
  return { state, admitted, startAt, held };
}

/**
 * The earliest time a send may start under a rate limit of `count` per window: a window after the count-th latest
 * time an admitted send will have left by (`sentBy`, earliest first, already cut to those inside the window). Any
 * window holding this send then holds at most count - 1 others, whenever each of them leaves within its margin.
 */
function nextSendAt(
  sentBy: readonly number[],
  { count, windowMs }: { count: number; windowMs: number },
  now: number,
): number {
  if (sentBy.length < count) return now;
  return Math.max(now, sentBy[sentBy.length - count]! + windowMs);
}

function insertSorted(list: number[], value: number): void {
  let index = list.length;
  while (index > 0 && list[index - 1]! > value) index -= 1;
  list.splice(index, 0, value);
}

function holdFor(
  state: GateState,
  control: DeliveryControl,
  now: number,
  admittedNow: number,
  options: AdmitOptions,
  holdsSlot: boolean,
  sendsBackAt: number,
): { waitMs: number; reason: HoldReason } | null {
  if (control.paused || state.paused) return { waitMs: PAUSED_RECHECK_MS, reason: "paused" };
  if (state.openedAt !== null && control.breaker) {
    const nextProbeAt = (state.lastProbeAt ?? state.openedAt) + control.breaker.probeIntervalMs;
    if (state.probe !== null || now < nextProbeAt)
      return { waitMs: Math.max(IN_FLIGHT_RECHECK_MS, nextProbeAt - now), reason: "circuit-open" };
  }
  if (!holdsSlot && control.maxInFlight !== null && Object.keys(state.inFlight).length >= control.maxInFlight) {
    return { waitMs: SLOT_WAIT_FALLBACK_MS, reason: "max-in-flight" };
  }
  if (control.rateLimit) {
    const waitMs = nextSendAt(state.admissions, control.rateLimit, now) - now;
    const reachMs = options.reserveMs ?? 0;
    // Beyond reach: back on the queue until its turn is within reach.
    if (waitMs > reachMs) return { waitMs: rateLimitRecheckMs(now + waitMs, sendsBackAt), reason: "rate-limit" };
    if (waitMs <= 0 && admittedNow >= options.atOnce) return { waitMs: IN_FLIGHT_RECHECK_MS, reason: "rate-limit" };
  }
  return null;
}

/**
 * How long a delivery beyond a rate limit's reach stays on the queue before it asks again, in whole seconds (the
 * queue's unit), rounded down so that it is back by its send time (`turnAt`) rather than after it.
 *
 * Its caller sends it back once its own last paced send has started (`sendsBackAt`), and the delay runs from then: it
 * is due back QUEUE_RETURN_MS before its turn, rounded down, so up to a second sooner; its turn is then at most
 * QUEUE_RETURN_MS + 1 s away, within the reach of the consumer that asks again (RATE_RESERVE_MS), which admits it for
 * that time rather than hold it again. Zero when its turn is that close already: it comes straight back. Whoever held
 * it, a consumer that paces asks again: the only callers that cannot pace hold an event's first attempt while it carries
 * further deliveries, and once held its fan-out is written without it (src/consumers/deliveries/held-fan-out.ts).
 */
function rateLimitRecheckMs(turnAt: number, sendsBackAt: number): number {
  return Math.floor(Math.max(0, turnAt - sendsBackAt - QUEUE_RETURN_MS) / 1000) * 1000;
}

/** A copy without what has run out: admissions older than the window, slots and a probe whose holder never came back. */
function liveState(state: GateState, control: DeliveryControl, now: number): GateState {
  // A send that has left by a window ago shares no window with one starting now (each time already holds its margin).
  const windowMs = control.rateLimit ? control.rateLimit.windowMs : 0;
  return {
    ...state,
    admissions: control.rateLimit ? state.admissions.filter((sentBy) => sentBy > now - windowMs) : [],
    inFlight: Object.fromEntries(Object.entries(state.inFlight).filter(([, expiresAt]) => expiresAt > now)),
    probe: state.probe !== null && state.probe.expiresAt > now ? state.probe : null,
    // A breaker the config no longer has is closed.
    ...(control.breaker ? {} : CLOSED_BREAKER),
  };
}

/** The breaker's part of a gate's state when it is closed and has counted nothing. */
export const CLOSED_BREAKER = { failures: 0, openedAt: null, lastProbeAt: null } as const satisfies Partial<GateState>;

/** What an attempt's outcome says about the destination: only failures that a retry might cure count against it. */
export type AttemptVerdict = "success" | "failure" | "neutral";

export interface Release {
  state: GateState;
  /** The breaker opened or closed with these outcomes: announced once, by the caller. */
  transition: "opened" | "closed" | null;
  /** When it closed: when the run of failures it ends began (what a recovery replays from). */
  failingSince: number | null;
}

/** Frees the slots of finished attempts and counts their outcomes against the breaker, in the order given. */
export function release(
  previous: GateState,
  control: DeliveryControl,
  finished: readonly { id: string; verdict: AttemptVerdict }[],
  now: number,
): Release {
  // Read before liveState: it closes a breaker the config no longer has, and that close must be reported (its
  // open alert resolves) rather than pass unseen.
  const wasOpen = previous.openedAt !== null;
  const failingSince = previous.failingSince ?? null;
  const state = liveState(previous, control, now);
  for (const { id, verdict } of finished) {
    delete state.inFlight[id];
    if (state.probe?.id === id) state.probe = null;
    if (!control.breaker || verdict === "neutral") continue;
    if (verdict === "success") {
      state.failures = 0;
      state.openedAt = null;
      state.lastProbeAt = null;
      delete state.failingSince;
    } else {
      if (state.failures === 0) state.failingSince = now;
      state.failures += 1;
      if (state.openedAt === null && state.failures >= control.breaker.failures) {
        state.openedAt = now;
        state.lastProbeAt = now;
      }
    }
  }
  const isOpen = state.openedAt !== null;
  const transition = isOpen === wasOpen ? null : isOpen ? "opened" : "closed";
  return { state, transition, failingSince: transition === "closed" ? failingSince : null };
}

/**
 * Hands the slots free after a release to the deliveries waiting for one (`waiting`, oldest first), each reserved for
 * WOKEN_SLOT_MS until it arrives: the caller sends them on at once, so an in-flight-capped route keeps its cap busy
 * instead of leaving a slot idle until a held delivery looks again. Nothing wakes while paused or while the breaker
 * is open (a probe decides then).
 */
export function wake(
  previous: GateState,
  control: DeliveryControl,
  waiting: readonly string[],
  now: number,
): { state: GateState; woken: string[] } {
  if (control.maxInFlight === null || control.paused || previous.paused || previous.openedAt !== null)
    return { state: previous, woken: [] };
  const state = liveState(previous, control, now);
  const free = control.maxInFlight - Object.keys(state.inFlight).length;
  const woken = waiting.filter((id) => !(id in state.inFlight)).slice(0, Math.max(0, free));
  for (const id of woken) state.inFlight[id] = now + WOKEN_SLOT_MS;
  return { state: woken.length > 0 ? state : previous, woken };
}
