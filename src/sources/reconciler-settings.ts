import { parseDuration, type SourceConfig } from "./config";

/**
 * The reconciler's per-source settings, read from the source's table in wrangler.toml:
 *
 *   catch_up = { api = "stripe", api_key_secret = "STRIPE_API_KEY", endpoint = "we_123" }
 *   catch_up = { api = "stripe", api_key_secret = "STRIPE_API_KEY", enabled_events = ["invoice.paid"] }
 *   catch_up = { api = "github", api_key_secret = "GITHUB_TOKEN", hook = "repos/acme/shop/hooks/123" }
 *   alert_pending_after = "1h"
 *
 * Problems are returned, not thrown: one mis-configured source must not stop the cron for every other one.
 */

export type CatchUpApi = "stripe" | "github";

export interface CatchUpSettings {
  api: CatchUpApi;
  apiKeySecret: string;
  baseUrl: string;
  /** GitHub only: the hook's API path, `repos/<owner>/<repo>/hooks/<id>` or `orgs/<org>/hooks/<id>`. */
  hookPath: string | null;
  /**
   * Stripe only: which events the webhook endpoint receives, so catch-up claims no other. Either listed here
   * (`enabled_events`, Stripe's own names, "*" for all) or read from the endpoint (`endpoint = "we_…"`) on every
   * run; one of the two is required.
   */
  stripeEndpoint: string | null;
  enabledEvents: string[] | null;
  /** Stripe only: live (true) or test (false) events; unset: the endpoint's mode, else the API key's. */
  livemode: boolean | null;
  /** Re-read this much before the checkpoint: listing lag and clock error must not hide an event. */
  overlapMs: number;
  /** Where the very first run starts looking; later runs start from the checkpoint. */
  initialLookbackMs: number;
  /** Pages per source per run, so one run stays within a Worker's subrequest limit. */
  maxPages: number;
}

const DEFAULT_BASE_URLS: Record<CatchUpApi, string> = {
  stripe: "https://api.stripe.com",
  github: "https://api.github.com",
};
const DEFAULT_OVERLAP_MS = 10 * 60_000;
const DEFAULT_INITIAL_LOOKBACK_MS = 60 * 60_000;
const DEFAULT_MAX_PAGES = 5;
const MAX_PAGES_CEILING = 50;
export const DEFAULT_PENDING_ALERT_AFTER_MS = 60 * 60_000;

const STRIPE_ENDPOINT = /^we_[A-Za-z0-9_]{1,255}$/;
const STRIPE_EVENT_TYPE = /^(?:\*|[a-z0-9_]+(?:\.[a-z0-9_]+)+)$/;
const HOOK_PATH = /^(?:repos\/[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+|orgs\/[A-Za-z0-9_.-]+)\/hooks\/\d+$/;

export type Parsed<T> = { ok: true; value: T } | { ok: false; problems: string[] };

export function catchUpSettings(source: SourceConfig): Parsed<CatchUpSettings> | null {
  const raw = source.options.catch_up;
  if (raw === undefined) return null;
  const where = `SOURCES.${source.name}.catch_up`;
  if (!raw || typeof raw !== "object" || Array.isArray(raw))
    return { ok: false, problems: [`${where} must be a table`] };
  const table = raw as Record<string, unknown>;
  const problems: string[] = [];

  const api = table.api;
  if (api !== "stripe" && api !== "github") problems.push(`${where}.api must be "stripe" or "github"`);
  const apiKeySecret = table.api_key_secret;
  if (typeof apiKeySecret !== "string" || apiKeySecret.length === 0) {
    problems.push(`${where}.api_key_secret must name a Worker secret`);
  }
  const baseUrl = table.base_url ?? (api === "stripe" || api === "github" ? DEFAULT_BASE_URLS[api] : undefined);
  if (typeof baseUrl !== "string" || !/^https?:\/\/[^/]+/.test(baseUrl))
    problems.push(`${where}.base_url must be an http(s) URL`);
  let hookPath: string | null = null;
  if (api === "github") {
    if (typeof table.hook !== "string" || !HOOK_PATH.test(table.hook)) {
      problems.push(`${where}.hook must be "repos/<owner>/<repo>/hooks/<id>" or "orgs/<org>/hooks/<id>"`);
    } else {
      hookPath = table.hook;
    }
  }
  let stripeEndpoint: string | null = null;
  let enabledEvents: string[] | null = null;
  let livemode: boolean | null = null;
  if (api === "stripe") {
    if (table.endpoint !== undefined) {
      if (typeof table.endpoint !== "string" || !STRIPE_ENDPOINT.test(table.endpoint))
        problems.push(`${where}.endpoint must be a webhook endpoint id like "we_123"`);
      else stripeEndpoint = table.endpoint;
    }
    if (table.enabled_events !== undefined) {
      const events = table.enabled_events;
      if (
        !Array.isArray(events) ||
        events.length === 0 ||
        !events.every((name) => typeof name === "string" && STRIPE_EVENT_TYPE.test(name))
      ) {
        problems.push(
          `${where}.enabled_events must be a non-empty list of Stripe event types ("invoice.paid", or "*" for all)`,
        );
      } else {
        enabledEvents = events as string[];
      }
    }
    if (table.endpoint === undefined && table.enabled_events === undefined) {
      problems.push(
        `${where} must name the webhook endpoint (endpoint = "we_…") or list its enabled_events, so catch-up claims only events the endpoint receives`,
      );
    }
    if (table.livemode !== undefined) {
      if (typeof table.livemode !== "boolean")
        problems.push(`${where}.livemode must be true (live events) or false (test events)`);
      else livemode = table.livemode;
    }
  }
  const overlapMs = durationOr(table.overlap, DEFAULT_OVERLAP_MS, `${where}.overlap`, problems);
  const initialLookbackMs = durationOr(
    table.initial_lookback,
    DEFAULT_INITIAL_LOOKBACK_MS,
    `${where}.initial_lookback`,
    problems,
  );
  const maxPages = table.max_pages ?? DEFAULT_MAX_PAGES;
  if (typeof maxPages !== "number" || !Number.isInteger(maxPages) || maxPages < 1 || maxPages > MAX_PAGES_CEILING) {
    problems.push(`${where}.max_pages must be an integer from 1 to ${MAX_PAGES_CEILING}`);
  }
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    value: {
      api: api as CatchUpApi,
      apiKeySecret: apiKeySecret as string,
      baseUrl: (baseUrl as string).replace(/\/+$/, ""),
      hookPath,
      stripeEndpoint,
      enabledEvents,
      livemode,
      overlapMs,
      initialLookbackMs,
      maxPages: maxPages as number,
    },
  };
}

export function pendingAlertAfterMs(source: SourceConfig): number {
  return parseDuration(source.options.alert_pending_after) ?? DEFAULT_PENDING_ALERT_AFTER_MS;
}

function durationOr(value: unknown, fallback: number, where: string, problems: string[]): number {
  if (value === undefined) return fallback;
  const parsed = parseDuration(value);
  if (parsed === null) {
    problems.push(`${where} must be a duration like "10m"`);
    return fallback;
  }
  return parsed;
}
