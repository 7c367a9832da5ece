import { env } from "cloudflare:workers";
import { probeTimeOf, type QueuedWork, routeNamedBy } from "../../src/model/work-message";
import { runCron, withOnlySources } from "../reconcile/support";
import { keysOf, type LaneRequest, lane, sendCredit, setLane } from "../routing/gate-support";
import { eventually } from "../support/deliveries";

/**
 * The two homes of a delivery's state (docs/processing.md, "Deliveries"): the receipt row, which carries its first
 * matched route's delivery, and a `deliveries` row, one per further route. Each home is a source of
 * test/fixtures/sources/both-homes.json whose route `under-test` forwards to a lane of the Node stand-in
 * (test/setup/global/forward-standin.ts): the only route of homes-own, the second of homes-further (whose first
 * route, `first`, always answers 204). Both retry after an hour (so a failed delivery waits in D1 through a test),
 * give up after three attempts and order by `data.account`. Events go through the real route, signed.
 */

export const ROUTE = "under-test";
const HOUR = 3_600_000;

/** A delivery's state, read from whichever row holds it. */
export interface DeliveryState {
  status: string;
  attempts: number;
  leaseGeneration: number;
  leaseUntil: number | null;
  nextAttemptAt: number | null;
  lastError: string | null;
}

/** What a consumer that died mid-attempt leaves behind: a delivery still `processing`, its lease run out. */
export interface AbandonedLease {
  attempts: number;
  leaseUntil: number;
  nextAttemptAt: number;
}

export interface Home {
  name: string;
  source: string;
  /** The stand-in lane the delivery under test forwards to. */
  laneName: string;
  /** The route a queue message for this delivery names: none for a receipt's own. */
  messageRoute: string | undefined;
  /** The query that replays this delivery alone (POST /admin/api/receipts/<id>/replay). */
  replayQuery: string;
  /** The Idempotency-Key its forwards carry. */
  requestKey(receiptId: string): string;
  read(receiptId: string): Promise<DeliveryState | null>;
  /** Whether a GET /admin/api/dead answer lists this delivery. */
  listedDead(answer: DeadList, receiptId: string): boolean;
  /** Leaves the delivery as a consumer that died mid-attempt would (a crash cannot be staged in workerd). */
  abandon(receiptId: string, lease: AbandonedLease): Promise<void>;
  /** The receipt's own route, when it is not the one under test: its status (processed once its route answered). */
  ownRouteStatus(receiptId: string): Promise<string | null>;
}

export interface DeadList {
  receipts: { receiptId: string }[];
  deadDeliveries?: { receiptId: string; route: string }[];
}

const STATE_COLUMNS = `status, attempts, lease_generation AS leaseGeneration, lease_until AS leaseUntil,
  next_attempt_at AS nextAttemptAt, last_error AS lastError`;

async function receiptStatus(receiptId: string): Promise<string | null> {
  const row = await env.DB.prepare("SELECT status FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ status: string }>();
  return row?.status ?? null;
}

export const ownHome: Home = {
  name: "the receipt's own delivery",
  source: "homes-own",
  laneName: "homes-own",
  messageRoute: undefined,
  replayQuery: "",
  requestKey: (receiptId) => receiptId,
  read: (receiptId) =>
    env.DB.prepare(`SELECT ${STATE_COLUMNS} FROM receipts WHERE id = ?`).bind(receiptId).first<DeliveryState>(),
  listedDead: (answer, receiptId) => answer.receipts.some((row) => row.receiptId === receiptId),
  async abandon(receiptId, lease) {
    await env.DB.prepare(
      `UPDATE receipts SET status = 'processing', attempts = ?, lease_generation = ?, lease_until = ?,
       next_attempt_at = ? WHERE id = ?`,
    )
      .bind(lease.attempts, lease.attempts, lease.leaseUntil, lease.nextAttemptAt, receiptId)
      .run();
  },
  ownRouteStatus: async () => null,
};

export const furtherHome: Home = {
  name: "a further delivery",
  source: "homes-further",
  laneName: "homes-further",
  messageRoute: ROUTE,
  replayQuery: `?route=${ROUTE}`,
  requestKey: (receiptId) => `${receiptId}:${ROUTE}`,
  read: (receiptId) =>
    env.DB.prepare(`SELECT ${STATE_COLUMNS} FROM deliveries WHERE receipt_id = ? AND route = ?`)
      .bind(receiptId, ROUTE)
      .first<DeliveryState>(),
  listedDead: (answer, receiptId) =>
    (answer.deadDeliveries ?? []).some((row) => row.receiptId === receiptId && row.route === ROUTE),
  async abandon(receiptId, lease) {
    await env.DB.prepare(
      `UPDATE deliveries SET status = 'processing', attempts = ?, lease_generation = ?, lease_until = ?,
       next_attempt_at = ? WHERE receipt_id = ? AND route = ?`,
    )
      .bind(lease.attempts, lease.attempts, lease.leaseUntil, lease.nextAttemptAt, receiptId, ROUTE)
      .run();
  },
  ownRouteStatus: receiptStatus,
};

/** A value of `data.account` no other event shares: unordered against every other test's events. */
export function freshAccount(): string {
  return `acct_${crypto.randomUUID().slice(0, 12)}`;
}

/** Makes the lane answer `status` to everything; 0 gives it back its own rule (204 after 200 ms). */
export function answer(home: Home, status: number): Promise<void> {
  return setLane(home.laneName, status);
}

/** Sends an event for `account` through the real route: its receipt id, once the receipt is in D1. */
export function sendEvent(home: Home, account = freshAccount()): Promise<string> {
  return sendCredit(home.source, { account, amount: 1 });
}

/** Waits until the delivery's state passes `test` (and, for a further one, the receipt's own route is processed). */
export async function deliveryWhen(
  home: Home,
  receiptId: string,
  what: string,
  test: (state: DeliveryState) => boolean,
  timeoutMs = 30_000,
): Promise<DeliveryState> {
  return eventually(
    async () => {
      const state = await home.read(receiptId);
      if (state === null || !test(state)) return undefined;
      const own = await home.ownRouteStatus(receiptId);
      return own === null || own === "processed" ? state : undefined;
    },
    timeoutMs,
    `${home.name} of ${receiptId}: ${what}`,
  );
}

export const isDead = (state: DeliveryState) => state.status === "dead";
export const isProcessed = (state: DeliveryState) => state.status === "processed";
/** Its first attempt failed and it waits out the hour's retry delay. */
export const failedOnce = (state: DeliveryState) =>
  state.status === "pending" && state.attempts === 1 && state.nextAttemptAt !== null;
/** Waiting for its turn behind an earlier event: pending with a due time, no attempt spent. */
export const heldBack = (state: DeliveryState) =>
  state.status === "pending" && state.attempts === 0 && state.nextAttemptAt !== null;

/** An event whose delivery's first attempt the lane answered 500: pending, due again in an hour. */
export async function sendFailingOnce(home: Home, account?: string): Promise<string> {
  await answer(home, 500);
  const receiptId = await sendEvent(home, account);
  await deliveryWhen(home, receiptId, "failed once", failedOnce);
  return receiptId;
}

/** An event whose delivery the lane refused (400): dead at its first attempt. */
export async function sendRefused(home: Home): Promise<string> {
  await answer(home, 400);
  const receiptId = await sendEvent(home);
  await deliveryWhen(home, receiptId, "dead", isDead);
  return receiptId;
}

/** The lane's requests for these receipts' deliveries, in arrival order. */
export async function requestsFor(home: Home, receiptIds: readonly string[]): Promise<LaneRequest[]> {
  const keys = new Set(receiptIds.map((receiptId) => home.requestKey(receiptId)));
  return (await lane(home.laneName)).filter((request) => keys.has(request.headers["idempotency-key"] ?? ""));
}

/** Receipt ids in the order their deliveries' requests reached the lane (once per request). */
export async function arrivals(home: Home, receiptIds: readonly string[]): Promise<string[]> {
  const byKey = new Map(receiptIds.map((receiptId) => [home.requestKey(receiptId), receiptId]));
  return keysOf(await requestsFor(home, receiptIds)).map((key) => byKey.get(key ?? "")!);
}

export interface SentWork {
  body: QueuedWork;
  delaySeconds: number;
}

/**
 * The work queue with every work message lost (recorded, never delivered), as a dead local runtime loses them; the
 * cron's probes still go to the real queue, so the consumer keeps answering them and the re-drive is never held back.
 */
export function losingWork(sent: SentWork[]): Queue {
  const take = async (body: QueuedWork, delaySeconds = 0) => {
    if (probeTimeOf(body) !== null) await env.WORK_QUEUE.send(body, { contentType: "json" });
    else sent.push({ body, delaySeconds });
  };
  return {
    send: (body: QueuedWork, options?: QueueSendOptions) => take(body, options?.delaySeconds),
    sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>, options?: QueueSendBatchOptions) => {
      for (const message of messages) await take(message.body, message.delaySeconds ?? options?.delaySeconds);
    },
  } as unknown as Queue;
}

/** The messages that would carry this delivery: its receipt named, and its route (none for a receipt's own). */
export function carrying(home: Home, sent: readonly SentWork[], receiptId: string): SentWork[] {
  return sent.filter(
    ({ body }) =>
      "receiptIds" in body && body.receiptIds.includes(receiptId) && routeNamedBy(body) === home.messageRoute,
  );
}

/**
 * The bindings with SOURCES narrowed to the two homes' sources: a cron run over every fixture source visits hundreds
 * of cold claim shards, and these tests read what it did for their own deliveries.
 */
const homesOnly = (): Env => withOnlySources(ownHome.source, furtherHome.source);

/** The cron at `clock`, over the homes' sources. */
export async function homesCron(clock: number): Promise<void> {
  await runCron(clock, homesOnly());
}

/** A cron run at `clock` (over the homes' sources) whose work messages are lost: what it sent. */
export async function cronLosingWork(clock: number): Promise<SentWork[]> {
  const sent: SentWork[] = [];
  await runCron(clock, { ...homesOnly(), WORK_QUEUE: losingWork(sent) });
  return sent;
}

/** Incidents open for the source, by kind. */
export async function openIncidents(source: string): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT kind FROM alerts WHERE source = ? AND state = 'open' ORDER BY kind")
    .bind(source)
    .all<{ kind: string }>();
  return results.map((row) => row.kind);
}

/** The receipt's stored body: whether it is still there, or null once the receipt itself is gone. */
export async function bodyKept(receiptId: string): Promise<boolean | null> {
  const row = await env.DB.prepare(
    "SELECT body IS NOT NULL OR body_location IS NOT NULL AS kept FROM receipts WHERE id = ?",
  )
    .bind(receiptId)
    .first<{ kept: number }>();
  return row === null ? null : row.kept === 1;
}

export const hoursLater = (now: number, hours: number) => now + hours * HOUR;
