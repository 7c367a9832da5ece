import { planInVersionOrder } from "../../../src/handlers/ordering";
import { registerHandler } from "../../../src/handlers/registry";
import { type HandlerPlan, PermanentFailure, type WebhookHandler } from "../../../src/handlers/types";
import { envWithSources, handlerSource } from "./processing";

/**
 * Handlers that exist only in the processing tests, registered when this module loads. Their sources are not in
 * the shared SOURCES binding (every other test file would then fail config validation on an unknown handler):
 * tests run them through `testEnv`, the real bindings plus these sources, by calling processReceipt or the
 * queue handler directly.
 *
 * Each one's effect is a credit on the shared `accounts` table, so "applied exactly once" is a number to check.
 */

interface ScriptedPayload {
  account: string;
  amount: number;
  /** "transient" fails like a 500 every time; "permanent" fails validation. */
  fail?: "transient" | "permanent";
}

interface Hang {
  until: Promise<void>;
  thenFail: string | null;
  entered: () => void;
}

/** Hangs set for an event, in the order its runs take them (each hang stops one run). */
const hangs = new Map<string, Hang[]>();

/**
 * The next run of this event (after any hangs already set for it) stops mid-attempt, before its commit, until the
 * returned function is called; never calling it is how a test plays an isolate that died there. With `thenFail`,
 * the run then fails permanently (its receipt goes dead) instead of carrying on. `entered` resolves once a run
 * has stopped at this hang.
 */
export function hangNextRun(
  eventKey: string,
  thenFail: string | null = null,
): (() => void) & { entered: Promise<void> } {
  let release!: () => void;
  let entered!: () => void;
  const enteredPromise = new Promise<void>((resolve) => (entered = resolve));
  hangs.set(eventKey, [
    ...(hangs.get(eventKey) ?? []),
    { until: new Promise<void>((resolve) => (release = resolve)), thenFail, entered },
  ]);
  return Object.assign(() => release(), { entered: enteredPromise });
}

/** Waits out the first hang set for this event's runs, if any. */
async function waitIfHung(eventKey: string): Promise<void> {
  const [hang, ...rest] = hangs.get(eventKey) ?? [];
  if (!hang) return;
  if (rest.length > 0) hangs.set(eventKey, rest);
  else hangs.delete(eventKey);
  hang.entered();
  await hang.until;
  if (hang.thenFail !== null) throw new PermanentFailure(hang.thenFail);
}

function credit(db: D1Database, account: string, amount: number): D1PreparedStatement {
  return db
    .prepare(
      "INSERT INTO accounts (id, credits) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET credits = credits + excluded.credits",
    )
    .bind(account, amount);
}

const scripted: WebhookHandler = async (event, { db }): Promise<HandlerPlan> => {
  const payload = event.payload as ScriptedPayload;
  await waitIfHung(event.eventKey);
  if (payload.fail === "transient") throw new Error("deliberate failure, as a 500 would be");
  if (payload.fail === "permanent") throw new PermanentFailure("amount is not a number");
  return { outcome: "apply", statements: [credit(db, payload.account, payload.amount)] };
};

interface VersionedPayload {
  account: string;
  plan: string;
  version?: number;
  /** Provider timestamp (ms) for sources that give no version. */
  at?: number;
  /** Wait after the version read, to widen the race between two events for one object. */
  pauseMs?: number;
}

/** What the versioned handler planned, by receipt: "apply" followed by a stale receipt means the batch-level claim lost. */
export const plannedOutcomes = new Map<string, HandlerPlan["outcome"]>();

/** Sets the account's plan in version order, through object_versions; each application also adds one credit. */
const versioned: WebhookHandler = async (event, context) => {
  const payload = event.payload as VersionedPayload;
  const orderedBy = payload.version !== undefined ? { version: payload.version } : { timestamp: payload.at! };
  const plan = await planInVersionOrder(event, context, { objectType: "plan", objectId: payload.account }, orderedBy, [
    context.db
      .prepare(
        `INSERT INTO accounts (id, credits, plan) VALUES (?1, 1, ?2)
         ON CONFLICT (id) DO UPDATE SET plan = excluded.plan, credits = credits + 1`,
      )
      .bind(payload.account, payload.plan),
  ]);
  plannedOutcomes.set(event.receiptId, plan.outcome);
  if (payload.pauseMs) await new Promise((resolve) => setTimeout(resolve, payload.pauseMs));
  return plan;
};

interface ExternalPayload {
  account: string;
  callUrl: string;
  timeoutMs: number;
  /** Fail like a 500 after the call (and after any hang), so the attempt ends in a retry. */
  failAfterCall?: boolean;
}

/** Notifies an external API (with the receipt's idempotency key; the call takes the lease), then credits the account. */
const external: WebhookHandler = async (event, context) => {
  const payload = event.payload as ExternalPayload;
  const response = await context.callExternal("notify", {
    url: payload.callUrl,
    body: JSON.stringify({ account: payload.account }),
    headers: { "content-type": "application/json" },
    timeoutMs: payload.timeoutMs,
  });
  await response.body?.cancel();
  await waitIfHung(event.eventKey);
  if (payload.failAfterCall) throw new Error("deliberate failure after the external call");
  return { outcome: "apply", statements: [credit(context.db, payload.account, 1)] };
};

registerHandler("test-scripted", scripted);
registerHandler("test-versioned", versioned);
registerHandler("test-external", external);

/** Sources for the handlers above: the normal schedule, a fast one for tests that wait in real time. */
export const testEnv = envWithSources({
  "proc-handler": handlerSource("test-scripted"),
  "proc-handler-fast": handlerSource("test-scripted", { base_delay_seconds: 1, max_delay_seconds: 1, max_retries: 2 }),
  "proc-versioned": handlerSource("test-versioned"),
  "proc-external": handlerSource("test-external"),
  "proc-external-fast": handlerSource("test-external", { base_delay_seconds: 1, max_delay_seconds: 1, max_retries: 2 }),
});
