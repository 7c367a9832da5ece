import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { SourceConfig } from "../../src/sources/config";
import { catchUpSettings } from "../../src/sources/reconciler-settings";
import { loadSources } from "../../src/sources/registry";

function withCatchUp(catchUp: unknown): SourceConfig {
  const base = loadSources(env).get("reconcile-stripe")!;
  return { ...base, name: "configured", options: { ...base.options, catch_up: catchUp } };
}

describe("catch_up settings", () => {
  it("reads a Stripe and a GitHub table with their defaults", () => {
    expect(
      catchUpSettings(withCatchUp({ api: "stripe", api_key_secret: "STRIPE_API_KEY", endpoint: "we_1Nx" })),
    ).toEqual({
      ok: true,
      value: {
        api: "stripe",
        apiKeySecret: "STRIPE_API_KEY",
        baseUrl: "https://api.stripe.com",
        hookPath: null,
        stripeEndpoint: "we_1Nx",
        enabledEvents: null,
        livemode: null,
        overlapMs: 600_000,
        initialLookbackMs: 3_600_000,
        maxPages: 5,
      },
    });
    const github = catchUpSettings(
      withCatchUp({ api: "github", api_key_secret: "GITHUB_TOKEN", hook: "orgs/acme/hooks/7", overlap: "30m" }),
    );
    expect(github).toMatchObject({
      ok: true,
      value: { baseUrl: "https://api.github.com", hookPath: "orgs/acme/hooks/7", overlapMs: 1_800_000 },
    });
  });

  it("names every problem of a bad table instead of guessing", () => {
    expect(catchUpSettings({ ...withCatchUp(undefined), options: {} })).toBeNull();
    expect(catchUpSettings(withCatchUp("stripe"))).toEqual({
      ok: false,
      problems: ["SOURCES.configured.catch_up must be a table"],
    });
    const bad = catchUpSettings(
      withCatchUp({ api: "shopify", base_url: "ftp://example", overlap: "soon", max_pages: 0 }),
    );
    expect(bad).toEqual({
      ok: false,
      problems: [
        'SOURCES.configured.catch_up.api must be "stripe" or "github"',
        "SOURCES.configured.catch_up.api_key_secret must name a Worker secret",
        "SOURCES.configured.catch_up.base_url must be an http(s) URL",
        'SOURCES.configured.catch_up.overlap must be a duration like "10m"',
        "SOURCES.configured.catch_up.max_pages must be an integer from 1 to 50",
      ],
    });
    expect(
      catchUpSettings(
        withCatchUp({
          api: "stripe",
          api_key_secret: "STRIPE_API_KEY",
          enabled_events: ["invoice.paid", "*"],
          livemode: true,
        }),
      ),
    ).toMatchObject({
      ok: true,
      value: { stripeEndpoint: null, enabledEvents: ["invoice.paid", "*"], livemode: true },
    });
    // Stripe lists every event in the account: catch-up must know which ones the endpoint receives.
    expect(catchUpSettings(withCatchUp({ api: "stripe", api_key_secret: "STRIPE_API_KEY" }))).toEqual({
      ok: false,
      problems: [
        'SOURCES.configured.catch_up must name the webhook endpoint (endpoint = "we_…") or list its enabled_events, so catch-up claims only events the endpoint receives',
      ],
    });
    expect(
      catchUpSettings(
        withCatchUp({
          api: "stripe",
          api_key_secret: "K",
          endpoint: "https://x",
          enabled_events: [],
          livemode: "live",
        }),
      ),
    ).toEqual({
      ok: false,
      problems: [
        'SOURCES.configured.catch_up.endpoint must be a webhook endpoint id like "we_123"',
        'SOURCES.configured.catch_up.enabled_events must be a non-empty list of Stripe event types ("invoice.paid", or "*" for all)',
        "SOURCES.configured.catch_up.livemode must be true (live events) or false (test events)",
      ],
    });
    expect(catchUpSettings(withCatchUp({ api: "github", api_key_secret: "GITHUB_TOKEN", hook: "repos/acme" }))).toEqual(
      {
        ok: false,
        problems: [
          'SOURCES.configured.catch_up.hook must be "repos/<owner>/<repo>/hooks/<id>" or "orgs/<org>/hooks/<id>"',
        ],
      },
    );
  });
});
