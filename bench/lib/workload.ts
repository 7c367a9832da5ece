import type { BenchFlags } from "./flags.ts";
import { keyedDraw, mulberry32 } from "./random.ts";

/**
 * The logical events and the order a faulty sender delivers them in, after the published simulation: credits
 * and versioned plan changes over a set of accounts, some plan changes paired within one second, and four faults
 * drawn per event (duplicate later, concurrent pair, shuffle) or per attempt (response lost after commit).
 */

export type BenchEvent =
  | { kind: "credit"; index: number; eventKey: string; accountId: string; amount: number; createdAt: number }
  | {
      kind: "plan";
      index: number;
      eventKey: string;
      accountId: string;
      version: number;
      createdAt: number;
      sameSecondPair: boolean;
    };

export interface Workload {
  events: BenchEvent[];
  /** Latest plan version generated per account: what every account must end on. */
  latestPlanVersion: Map<string, number>;
  /** Expected credits per account. */
  expectedCredits: Map<string, number>;
  sameSecondPairs: number;
}

export type DeliveryKind = "first" | "first+concurrent" | "duplicate" | "retry";

/** One scheduled send: `copies` requests for one event, started together. `position` orders the stream. */
export interface ScheduledDelivery {
  position: number;
  event: BenchEvent;
  copies: number;
  kind: DeliveryKind;
}

export function accountName(prefix: string, accountIndex: number): string {
  return `${prefix}${String(accountIndex).padStart(4, "0")}`;
}

export function makeWorkload(
  flags: BenchFlags,
  eventCount: number,
  keyPrefix: string,
  accountPrefix: string,
): Workload {
  const random = mulberry32(flags.seed);
  const events: BenchEvent[] = [];
  const latestPlanVersion = new Map<string, number>();
  const expectedCredits = new Map<string, number>();
  let createdAt = 1_790_000_000;
  let sameSecondPairs = 0;
  const nextKey = () => `${keyPrefix}${String(events.length).padStart(6, "0")}`;
  const pushPlan = (accountId: string, sameSecondPair: boolean) => {
    const version = (latestPlanVersion.get(accountId) ?? 0) + 1;
    latestPlanVersion.set(accountId, version);
    events.push({
      kind: "plan",
      index: events.length,
      eventKey: nextKey(),
      accountId,
      version,
      createdAt,
      sameSecondPair,
    });
  };
  while (events.length < eventCount) {
    if (random() < 0.5) createdAt += 1;
    const accountId = accountName(accountPrefix, Math.floor(random() * flags.accounts));
    if (random() < flags.creditShare) {
      events.push({ kind: "credit", index: events.length, eventKey: nextKey(), accountId, amount: 100, createdAt });
      expectedCredits.set(accountId, (expectedCredits.get(accountId) ?? 0) + 100);
    } else {
      pushPlan(accountId, false);
      if (random() < flags.tieChance && events.length < eventCount) {
        pushPlan(accountId, true);
        sameSecondPairs++;
      }
    }
  }
  return { events, latestPlanVersion, expectedCredits, sameSecondPairs };
}

export function scheduleDeliveries(flags: BenchFlags, events: readonly BenchEvent[]): ScheduledDelivery[] {
  const draw = (...parts: Array<string | number>) => keyedDraw(flags.seed, ...parts);
  const schedule: ScheduledDelivery[] = [];
  for (const event of events) {
    let position = event.index;
    if (draw(event.eventKey, "shuffle") < flags.shuffleChance) {
      position += (draw(event.eventKey, "shift") * 2 - 1) * flags.shuffleWindow;
    }
    const concurrent = draw(event.eventKey, "concurrent") < flags.concurrentChance;
    schedule.push({ position, event, copies: concurrent ? 2 : 1, kind: concurrent ? "first+concurrent" : "first" });
    if (draw(event.eventKey, "dup") < flags.duplicateChance) {
      schedule.push({
        position: event.index + 1 + draw(event.eventKey, "dupAt") * 200,
        event,
        copies: 1,
        kind: "duplicate",
      });
    }
  }
  return schedule.sort((a, b) => a.position - b.position || a.event.index - b.event.index);
}

/** The body the demo source's `accounts` handler understands (docs/architecture.md, "The example domain"). */
export function eventBody(event: BenchEvent): string {
  return event.kind === "credit"
    ? JSON.stringify({ type: "account.credited", data: { account: event.accountId, amount: event.amount } })
    : JSON.stringify({
        type: "account.plan_changed",
        created: event.createdAt,
        data: { account: event.accountId, plan: `plan_v${event.version}`, version: event.version },
      });
}
