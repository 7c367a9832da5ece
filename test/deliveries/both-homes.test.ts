import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { ATTEMPTS_IN_FLIGHT } from "../../src/consumers/attempt/slice-budget";
import { OVERDUE_GRACE_MS } from "../../src/reconcile/redrive";
import { requeueUnfinished } from "../../src/reconcile/restart-requeue";
import { enqueueWork } from "../../src/relay/enqueue";
import { adminGet, adminPost } from "../admin/support";
import { CRON_TEST_TIMEOUT_MS } from "../reconcile/support";
import {
  answer,
  arrivals,
  bodyKept,
  carrying,
  cronLosingWork,
  type DeadList,
  deliveryWhen,
  failedOnce,
  freshAccount,
  furtherHome,
  heldBack,
  homesCron,
  hoursLater,
  isDead,
  isProcessed,
  losingWork,
  openIncidents,
  ownHome,
  requestsFor,
  type SentWork,
  sendEvent,
  sendFailingOnce,
  sendRefused,
} from "./homes";

/**
 * Every no-lost-work guarantee, run once per home of a delivery's state (issue 34): the receipt's own delivery (the
 * receipt row) and a further delivery (its `deliveries` row). Each case sends its events through the real route and
 * reads the delivery's row; the consumer, the cron and the admin API are the real ones, over real D1, Durable
 * Objects and Queues. A third home would be a third entry here, and every guarantee would run for it.
 *
 * Within a home the cases run in order against one source: the watch's case comes first, while the source has no
 * dead or waiting delivery, and retention's last, since its clocks are weeks ahead.
 */

const DAY = 86_400_000;
/** homes.json's retry: max_retries 2, so the third attempt is the last. */
const LAST_ATTEMPT = 3;

describe.each([ownHome, furtherHome])("$name", { timeout: CRON_TEST_TIMEOUT_MS }, (home) => {
  afterEach(() => answer(home, 0));

  it("the watch opens a dead-letters incident when it dies, and a pending-age one when it waits too long", async () => {
    const now = Date.now();
    await cronLosingWork(now); // the baseline: nothing dead, nothing waiting
    expect(await openIncidents(home.source)).toEqual([]);
    await sendRefused(home);
    await sendFailingOnce(home);
    // Two hours on, the waiting one is older than alert_pending_after (1 h); the dead count grew.
    await cronLosingWork(hoursLater(now, 2));
    expect(await openIncidents(home.source)).toEqual(["dead-letters", "pending-age"]);
  });

  it("a refused delivery is dead, and GET /admin/api/dead lists it", async () => {
    const receiptId = await sendRefused(home);
    expect(await home.read(receiptId)).toMatchObject({ status: "dead", attempts: 1, nextAttemptAt: null });
    const response = await adminGet(`/admin/api/dead?source=${home.source}`);
    expect(response.status).toBe(200);
    expect(home.listedDead(await response.json<DeadList>(), receiptId)).toBe(true);
  });

  it("a dead delivery stays replayable, and its replay delivers it", async () => {
    const receiptId = await sendRefused(home);
    await answer(home, 0);
    const replayed = await adminPost(`/admin/api/receipts/${receiptId}/replay${home.replayQuery}`, {});
    expect(replayed.status).toBe(202);
    expect(await deliveryWhen(home, receiptId, "processed after its replay", isProcessed)).toMatchObject({
      status: "processed",
    });
    expect((await requestsFor(home, [receiptId])).map((request) => request.answer)).toEqual([400, 204]);
  });

  it("an abandoned lease past max_retries is dead-lettered, by the cron and by the consumer, never run again", async () => {
    const now = Date.now();
    // Each one's last attempt took its lease, and its consumer died (a poison event kills it): nothing finished it.
    const abandoned = {
      attempts: LAST_ATTEMPT,
      leaseUntil: now - 1000,
      nextAttemptAt: now - OVERDUE_GRACE_MS - 60_000,
    };
    const foundByCron = await sendFailingOnce(home);
    const redelivered = await sendFailingOnce(home);
    await home.abandon(foundByCron, abandoned);
    await home.abandon(redelivered, abandoned);

    // The real consumer gets the second's message (as the re-drive sends it); then the cron finds the first.
    await enqueueWork(env, home.source, [redelivered], 0, { redriven: true, route: home.messageRoute });
    await deliveryWhen(home, redelivered, "dead by the consumer", isDead);
    const sent = await cronLosingWork(now);
    for (const receiptId of [foundByCron, redelivered]) {
      const state = await deliveryWhen(home, receiptId, "dead", isDead);
      expect(state, receiptId === foundByCron ? "found by the cron" : "redelivered").toMatchObject({
        attempts: LAST_ATTEMPT,
        leaseUntil: null,
        nextAttemptAt: null,
      });
      expect(state.lastError).toMatch(/^gave up after 3 attempts: lease expired before the attempt finished/);
      expect(carrying(home, sent, receiptId)).toEqual([]);
    }
    // Only the first attempt ever reached the destination.
    expect(await requestsFor(home, [foundByCron, redelivered])).toHaveLength(2);
  });

  it("the cron's re-drive delivers a due delivery whose message was lost", async () => {
    const now = Date.now();
    const receiptId = await sendFailingOnce(home);
    await answer(home, 0);
    // Two hours on its retry is long overdue, and its message (delayed an hour) never came: the cron sends another.
    await homesCron(hoursLater(now, 2));
    expect(await deliveryWhen(home, receiptId, "processed by the re-drive", isProcessed)).toMatchObject({
      attempts: 2,
    });
    expect((await requestsFor(home, [receiptId])).map((request) => request.answer)).toEqual([500, 204]);
  });

  it("a restart's requeue puts it back on the queue with what is left of its wait", async () => {
    const receiptId = await sendFailingOnce(home);
    const dueAt = (await home.read(receiptId))!.nextAttemptAt!;
    const now = Date.now();
    const sent: SentWork[] = [];
    await requeueUnfinished({ ...env, WORK_QUEUE: losingWork(sent) }, now);
    const [message, ...more] = carrying(home, sent, receiptId);
    expect(more).toEqual([]);
    expect(message?.body).toMatchObject({ source: home.source });
    expect(message!.delaySeconds).toBeGreaterThan((dueAt - now) / 1000 - 2);
    expect(message!.delaySeconds).toBeLessThanOrEqual(Math.ceil((dueAt - now) / 1000));
  });

  it("ordered_by holds a later event of the same value behind a waiting one, then delivers both in order", async () => {
    const now = Date.now();
    const account = freshAccount();
    const first = await sendFailingOnce(home, account);
    await answer(home, 0);
    const later = await sendEvent(home, account);
    await deliveryWhen(home, later, "held behind the first", heldBack);
    expect(await requestsFor(home, [later])).toEqual([]);

    // The first one's retry comes (by the re-drive); the later one follows it, never before.
    for (let hours = 2; !isProcessed((await home.read(later))!); hours += 1) {
      expect(hours, "the later delivery is still held after 6 cron runs").toBeLessThan(8);
      await homesCron(hoursLater(now, hours));
      await deliveryWhen(home, first, "processed by the re-drive", isProcessed);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    expect(await arrivals(home, [first, later])).toEqual([first, first, later]);
    expect(await home.read(later)).toMatchObject({ status: "processed", attempts: 1 });
  });

  it(`never has more than ATTEMPTS_IN_FLIGHT (${ATTEMPTS_IN_FLIGHT}) attempts at its destination at once`, async () => {
    const count = ATTEMPTS_IN_FLIGHT + 4;
    const most = (requests: { openOnArrival: number }[]) =>
      Math.max(...requests.map((request) => request.openOnArrival));
    // First attempts, sent at once: the lane answers each after 200 ms, so a slice's attempts overlap.
    const firsts = await Promise.all(Array.from({ length: count }, () => sendEvent(home)));
    for (const receiptId of firsts) await deliveryWhen(home, receiptId, "processed", isProcessed, 60_000);
    expect(most(await requestsFor(home, firsts)), "first attempts").toBeLessThanOrEqual(ATTEMPTS_IN_FLIGHT);

    // Retries: all failed once, then one cron run re-drives them together (their hour's messages still on their way).
    await answer(home, 500);
    const retried = await Promise.all(Array.from({ length: count }, () => sendEvent(home)));
    for (const receiptId of retried) await deliveryWhen(home, receiptId, "failed once", failedOnce, 60_000);
    await answer(home, 0);
    await homesCron(hoursLater(Date.now(), 2));
    for (const receiptId of retried) await deliveryWhen(home, receiptId, "processed", isProcessed, 60_000);
    const redriven = (await requestsFor(home, retried)).filter((request) => request.answer === 204);
    expect(redriven).toHaveLength(count);
    expect(most(redriven), "re-driven retries").toBeLessThanOrEqual(ATTEMPTS_IN_FLIGHT);
  });

  it("retention keeps its body while it waits or is dead at 8 days, and keeps its receipt while it waits at 36", async () => {
    const now = Date.now();
    const done = await sendEvent(home);
    await deliveryWhen(home, done, "processed", isProcessed);
    const waiting = await sendFailingOnce(home);
    const dead = await sendRefused(home);

    const cronUntil = async (clock: number, finished: () => Promise<boolean>) => {
      for (let run = 0; !(await finished()); run++) {
        expect(run, "retention did not reach the finished receipt in 20 runs").toBeLessThan(20);
        await cronLosingWork(clock + run);
      }
    };
    // Eight days on: past payload retention (7 d) for a finished delivery, not for a waiting or dead one.
    await cronUntil(now + 8 * DAY, async () => (await bodyKept(done)) === false);
    expect(await bodyKept(waiting)).toBe(true);
    expect(await bodyKept(dead)).toBe(true);
    expect(await home.read(waiting)).toMatchObject({ status: "pending" });
    expect(await home.read(dead)).toMatchObject({ status: "dead" });

    // 36 days on: past dedupe retention (35 d); a delivery still waiting keeps its receipt, body and all.
    await cronUntil(now + 36 * DAY, async () => (await bodyKept(done)) === null);
    expect(await bodyKept(waiting)).toBe(true);
    expect(await home.read(waiting)).toMatchObject({ status: "pending" });
  });
});
