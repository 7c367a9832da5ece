import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";

/**
 * Every test file reads one SOURCES binding. It is built once, in vitest.config.ts, already pointing at this
 * run's forward stand-in (whichever free port the run took), and no test module rewrites it: results must not
 * depend on which test files an isolate loaded first.
 */

const sourcesNow = () => JSON.stringify(env.SOURCES);

describe("the shared SOURCES binding", () => {
  it("names this run's forward stand-in before any test support module has loaded", () => {
    const origin = inject("forwardStandinOrigin");
    const destinations = Object.values(env.SOURCES as Record<string, { destination?: unknown }>)
      .map((table) => table.destination)
      .filter((destination): destination is string => typeof destination === "string");
    // The fixtures' forward sources that meet the stand-in, recognised by its paths (test/setup/global/forward-standin.ts).
    const standinDestinations = destinations.filter((destination) =>
      /^http:\/\/127\.0\.0\.1:\d+\/(ok|poison|status\/|script\/)/.test(destination),
    );
    expect(standinDestinations.length).toBeGreaterThan(3);
    for (const destination of standinDestinations) expect(destination.startsWith(`${origin}/`)).toBe(true);
  });

  it("is left exactly as it was by loading the processing tests' support modules", async () => {
    const before = sourcesNow();
    await import("../consumers/support/processing");
    await import("../consumers/support/handlers");
    expect(sourcesNow()).toBe(before);
  });
});
