import { utf8Bytes } from "../../crypto/encoding";
import { stringAtPath } from "../../providers/json";
import { describePayload } from "../../providers/signed";
import type { EventIdentity, SourceOptions } from "../../providers/types";
import type { SourceConfig } from "../../sources/config";
import type { CatchUpSettings } from "../../sources/reconciler-settings";
import { type CatchUpCounts, claimMissing } from "./claim-missing";
import { callApi, type ListedPage, scanNewestFirst } from "./scan";

/**
 * Stripe: `GET /v1/events?created[gte]=<checkpoint − overlap>&created[lte]=<scan start>&limit=100`, newest first, paged with
 * `starting_after=<last id>` while `has_more`. Each event Stripe lists that the webhook endpoint subscribes to (its
 * enabled event types, in its live or test mode) but we never received is claimed with provenance "reconciled",
 * under the same identity the live Stripe adapter gives a delivery of it.
 */

const PAGE_SIZE = 100;

interface StripeEvent {
  id: string;
  created: number;
  [field: string]: unknown;
}

interface StripeList {
  object: "list";
  data: StripeEvent[];
  has_more: boolean;
}

/**
 * The identity the live Stripe adapter (src/providers/stripe.ts) gives a delivery of the same event: key = event
 * id, type = `type`, subject = `data.object.id`, occurred = `created`, through the same describePayload helper, so
 * per-source path overrides apply alike. The three default paths are repeated from the adapter, which does not
 * export them; test/reconcile/catch-up-stripe.test.ts checks a live and a reconciled receipt agree.
 */
export function stripeEventIdentity(event: unknown, options: SourceOptions): EventIdentity | null {
  const eventKey = stringAtPath(event, "id");
  if (!eventKey) return null;
  return {
    eventKey,
    eventKeyOrigin: "provider-id",
    // Read from Stripe's API over an authenticated call, not from an unverified sender.
    eventKeySigned: true,
    ...describePayload(event, options, { type: "type", subject: "data.object.id", occurredAt: "created" }),
    annotations: { "reconciled-from": "stripe:/v1/events" },
  };
}

/** What the webhook endpoint receives: these event types (or all), in one mode. */
export interface StripeSubscription {
  types: ReadonlySet<string> | "all";
  livemode: boolean;
}

interface StripeWebhookEndpoint {
  enabled_events?: unknown;
  livemode?: unknown;
}

/** Thrown when the mode cannot be known: configure `livemode`, or use a key or an endpoint that says it. */
export class StripeModeUnknown extends Error {
  override name = "StripeModeUnknown";
}

/** A Stripe key says its mode in its prefix: sk_live_/rk_live_ or sk_test_/rk_test_. */
function keyMode(apiKey: string): boolean | null {
  if (/^[sr]k_live_/.test(apiKey)) return true;
  if (/^[sr]k_test_/.test(apiKey)) return false;
  return null;
}

/**
 * The endpoint's subscription: the configured `enabled_events`, or the endpoint's own as the API reads it
 * (`GET /v1/webhook_endpoints/<id>`, one request per run, so a change in the dashboard applies at once); the mode
 * configured, else the endpoint's, else the API key's.
 */
export async function stripeSubscription(settings: CatchUpSettings, apiKey: string): Promise<StripeSubscription> {
  let endpoint: StripeWebhookEndpoint | null = null;
  if (settings.stripeEndpoint !== null && (settings.enabledEvents === null || settings.livemode === null)) {
    const response = await callApi(
      "stripe",
      `${settings.baseUrl}/v1/webhook_endpoints/${encodeURIComponent(settings.stripeEndpoint)}`,
      {
        headers: { authorization: `Bearer ${apiKey}` },
      },
    );
    endpoint = (await response.json()) as StripeWebhookEndpoint;
  }
  const listed =
    settings.enabledEvents ??
    (Array.isArray(endpoint?.enabled_events)
      ? endpoint.enabled_events.filter((name): name is string => typeof name === "string")
      : []);
  const livemode = settings.livemode ?? (typeof endpoint?.livemode === "boolean" ? endpoint.livemode : keyMode(apiKey));
  if (livemode === null) throw new StripeModeUnknown("cannot tell live from test mode: set catch_up.livemode");
  return { types: listed.includes("*") ? "all" : new Set(listed), livemode };
}

/** Whether the endpoint would have been sent this event. Pure. */
export function subscribedTo(event: unknown, subscription: StripeSubscription): boolean {
  const { type, livemode } = (event ?? {}) as { type?: unknown; livemode?: unknown };
  if (livemode !== subscription.livemode) return false;
  return subscription.types === "all" || (typeof type === "string" && subscription.types.has(type));
}

export async function catchUpStripe(
  env: Env,
  source: SourceConfig,
  settings: CatchUpSettings,
  apiKey: string,
  now: number,
): Promise<CatchUpCounts> {
  const counts: CatchUpCounts = {
    pages: 0,
    completed: false,
    listed: 0,
    alreadyReceived: 0,
    missingClaimed: 0,
    redeliveriesRequested: 0,
    redeliveriesWithheld: 0,
  };
  const subscription = await stripeSubscription(settings, apiKey);
  const report = await scanNewestFirst<StripeEvent>(env, source.name, "stripe-events", settings, now, {
    async fetchPage(from, until, cursor): Promise<ListedPage<StripeEvent>> {
      const url = new URL(`${settings.baseUrl}/v1/events`);
      url.searchParams.set("created[gte]", String(Math.floor(from / 1000)));
      url.searchParams.set("created[lte]", String(Math.floor(until / 1000)));
      url.searchParams.set("limit", String(PAGE_SIZE));
      if (cursor) url.searchParams.set("starting_after", cursor);
      const response = await callApi("stripe", url.toString(), { headers: { authorization: `Bearer ${apiKey}` } });
      const list = (await response.json()) as StripeList;
      const items = Array.isArray(list.data) ? list.data : [];
      const last = items.at(-1);
      return { items, nextCursor: list.has_more === true && last ? last.id : null };
    },
    async handlePage(events) {
      counts.listed += events.length;
      const found = await claimMissing(
        env,
        source,
        // Stripe lists every event in the account; only those the endpoint subscribes to, in its mode, were missed.
        events.flatMap((event) => {
          if (!subscribedTo(event, subscription)) return [];
          const identity = stripeEventIdentity(event, source.options);
          return identity ? [{ identity, rawBody: utf8Bytes(JSON.stringify(event)) }] : [];
        }),
        now,
      );
      counts.alreadyReceived += found.alreadyReceived;
      counts.missingClaimed += found.missingClaimed;
    },
  });
  counts.pages = report.pages;
  counts.completed = report.completed;
  return counts;
}
