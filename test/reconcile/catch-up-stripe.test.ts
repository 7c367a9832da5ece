import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { eventually, waitForStatus } from "../support/deliveries";
import {
  CRON_TEST_TIMEOUT_MS,
  cronRun,
  deliverStripe,
  pastClock,
  receipt,
  STAND_IN,
  standIn,
  standInRequests,
  stripeEvent,
  unique,
  withOnlySources,
} from "./support";

const SOURCE = "reconcile-stripe";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);
// This file's clock: the tests below run on it in order, an hour apart.
const clock = pastClock();

async function forwardsOf(eventKey: string) {
  return (await standInRequests(SOURCE)).filter(
    (request) => request.path === "/sink" && request.headers["x-webhook-event-key"] === eventKey,
  );
}

describe("Stripe catch-up", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("reaches the stand-in from inside workerd", async () => {
    const response = await fetch(`${STAND_IN}/_identity`);
    expect(await response.text()).toBe("reconcile-stand-in");
  });

  it("claims an omitted event once, processes it once, and re-applies nothing already received", async () => {
    const tag = unique();
    const now = clock;
    const received = stripeEvent(`evt_live_${tag}`, now - 4 * 60_000, `in_live_${tag}`);
    const omitted = stripeEvent(`evt_omitted_${tag}`, now - 3 * 60_000, `in_omitted_${tag}`);
    await standIn(SOURCE, "stripe-events", [received, omitted]);

    // Stripe signs pretty-printed JSON; the API's rendering of the same event is never byte-identical.
    const live = await deliverStripe(SOURCE, JSON.stringify(received, null, 2));
    expect(live.status).toBe(200);
    await waitForStatus(SOURCE, received.id);

    const first = await cronRun(now, CRON_ENV);
    expect(first.failures).toBeNull();
    expect(first.counts.catchUp[SOURCE]).toMatchObject({ completed: true });
    expect(first.counts.catchUp[SOURCE]!.missingClaimed).toBeGreaterThanOrEqual(1);

    expect(await waitForStatus(SOURCE, omitted.id)).toBe("processed");
    const claimed = await receipt(SOURCE, omitted.id);
    expect(claimed?.provenance).toBe("reconciled");
    // The reconciled receipt carries the identity the live Stripe adapter gave the delivered one.
    const identity = (eventKey: string) =>
      env.DB.prepare(
        "SELECT event_type AS eventType, subject AS subjectId, occurred_at AS occurredAt FROM receipts WHERE source = ? AND event_key = ?",
      )
        .bind(SOURCE, eventKey)
        .first();
    expect(await identity(omitted.id)).toEqual({
      eventType: "invoice.paid",
      subjectId: omitted.data.object.id,
      occurredAt: omitted.created * 1000,
    });
    expect(await identity(received.id)).toEqual({
      eventType: "invoice.paid",
      subjectId: received.data.object.id,
      occurredAt: received.created * 1000,
    });

    // A second run re-reads the overlap window and finds both events already here.
    const second = await cronRun(now + 5 * 60_000, CRON_ENV);
    expect(second.failures).toBeNull();
    expect(second.counts.catchUp[SOURCE]!.alreadyReceived).toBeGreaterThanOrEqual(2);

    await eventually(async () => ((await forwardsOf(omitted.id)).length === 1 ? true : undefined));
    expect(await forwardsOf(omitted.id)).toHaveLength(1);
    expect(await forwardsOf(received.id)).toHaveLength(1);
    expect((await receipt(SOURCE, received.id))?.provenance).toBe("live");
  });

  it("answers a live delivery that arrives after catch-up claimed the event as a duplicate, not a quarantine", async () => {
    const tag = unique();
    const now = clock + 60 * 60_000;
    const late = stripeEvent(`evt_late_${tag}`, now - 60_000, `in_late_${tag}`);
    await standIn(SOURCE, "stripe-events", [late]);

    await cronRun(now, CRON_ENV);
    const claimed = await waitForStatus(SOURCE, late.id);
    expect(claimed).toBe("processed");

    const live = await deliverStripe(SOURCE, JSON.stringify(late, null, 2));
    expect(live.status).toBe(200);
    expect(await live.json()).toMatchObject({
      status: "duplicate",
      receipt: (await receipt(SOURCE, late.id))?.receiptId,
    });
    const quarantined = await env.DB.prepare("SELECT COUNT(*) AS n FROM quarantine WHERE source = ? AND event_key = ?")
      .bind(SOURCE, late.id)
      .first<{ n: number }>();
    expect(quarantined?.n).toBe(0);
    expect(await forwardsOf(late.id)).toHaveLength(1);
  });
});

describe("Stripe catch-up claims only what the webhook endpoint subscribes to", {
  timeout: CRON_TEST_TIMEOUT_MS,
}, () => {
  it("skips event types the endpoint is not enabled for, and events of the other mode (configured enabled_events)", async () => {
    const tag = unique();
    const now = clock + 2 * 60 * 60_000;
    const subscribed = stripeEvent(`evt_sub_${tag}`, now - 3 * 60_000, `in_sub_${tag}`);
    const otherType = stripeEvent(`evt_type_${tag}`, now - 3 * 60_000, `cus_type_${tag}`, "customer.created");
    const otherMode = { ...stripeEvent(`evt_mode_${tag}`, now - 3 * 60_000, `in_mode_${tag}`), livemode: true };
    await standIn(SOURCE, "stripe-events", [subscribed, otherType, otherMode]);

    const run = await cronRun(now, CRON_ENV);
    expect(run.failures).toBeNull();
    expect(await waitForStatus(SOURCE, subscribed.id)).toBe("processed");
    expect(await receipt(SOURCE, otherType.id)).toBeNull();
    expect(await receipt(SOURCE, otherMode.id)).toBeNull();
  });

  it("reads the endpoint's enabled events and mode through the API when the source names the endpoint", async () => {
    const source = "reconcile-stripe-endpoint";
    const tag = unique();
    const now = clock + 3 * 60 * 60_000;
    // The endpoint (seeded by the stand-in's setup) receives customer.created, in test mode.
    const subscribed = stripeEvent(`evt_ep_sub_${tag}`, now - 3 * 60_000, `cus_ep_${tag}`, "customer.created");
    const otherType = stripeEvent(`evt_ep_type_${tag}`, now - 3 * 60_000, `in_ep_${tag}`);
    const otherMode = {
      ...stripeEvent(`evt_ep_mode_${tag}`, now - 3 * 60_000, `cus_ep_mode_${tag}`, "customer.created"),
      livemode: true,
    };
    await standIn(source, "stripe-events", [subscribed, otherType, otherMode]);

    const run = await cronRun(now, withOnlySources(source));
    expect(run.failures).toBeNull();
    await eventually(async () => ((await receipt(source, subscribed.id)) ? true : undefined));
    expect((await receipt(source, subscribed.id))?.provenance).toBe("reconciled");
    expect(await receipt(source, otherType.id)).toBeNull();
    expect(await receipt(source, otherMode.id)).toBeNull();
    const endpointReads = (await standInRequests(source)).filter(
      (request) => request.path === "/v1/webhook_endpoints/we_reconcile_endpoint",
    );
    expect(endpointReads.length).toBeGreaterThanOrEqual(1);
  });
});
