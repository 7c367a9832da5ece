import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { LATE_RELAY_MS } from "../../src/admin/receipts/receipt-cursor";
import { app } from "../../src/app";
import {
  DEFAULT_RELAY_DELAY_MS,
  MAX_LOCAL_RELAY_DELAY_MS,
  MAX_RELAY_DELAY_MS,
  relaySettings,
} from "../../src/claims/relay-settings";

/**
 * RELAY_HELD_BACK and RELAY_DELAY_MS are local-run knobs (the bench holds the relay back; the tests shorten it).
 * Deployed, they must never hold the relay silently: "0" and "false" mean off, a held-back relay is refused outside
 * a local run, the delay is bounded, and every value not honoured as written is named by /health.
 */

const deployed = (vars: Record<string, string>) => ({ LOCAL_DEVELOPMENT: undefined, ...vars });
const local = (vars: Record<string, string>) => ({ LOCAL_DEVELOPMENT: "true", ...vars });

describe("relay settings", () => {
  it('takes "0" and "false" as off, and only "true" or "1" as on, and only in a local run', () => {
    for (const off of ["0", "false"]) {
      expect(relaySettings(deployed({ RELAY_HELD_BACK: off }))).toEqual({
        delayMs: DEFAULT_RELAY_DELAY_MS,
        fullBatchWaits: false,
        problems: [],
      });
      expect(relaySettings(local({ RELAY_HELD_BACK: off })).fullBatchWaits).toBe(false);
    }
    for (const on of ["1", "true"]) {
      expect(relaySettings(local({ RELAY_HELD_BACK: on }))).toEqual({
        delayMs: DEFAULT_RELAY_DELAY_MS,
        fullBatchWaits: true,
        problems: [],
      });
      const refused = relaySettings(deployed({ RELAY_HELD_BACK: on }));
      expect(refused.fullBatchWaits).toBe(false);
      expect(refused.problems).toEqual([expect.stringContaining("RELAY_HELD_BACK is for local runs only")]);
    }
    // Neither LOCAL_DEVELOPMENT="yes" nor a stray word turns the hold on.
    expect(relaySettings({ LOCAL_DEVELOPMENT: "yes", RELAY_HELD_BACK: "1" }).fullBatchWaits).toBe(false);
    const stray = relaySettings(local({ RELAY_HELD_BACK: "yes" }));
    expect(stray.fullBatchWaits).toBe(false);
    expect(stray.problems).toEqual([expect.stringContaining('RELAY_HELD_BACK is "yes"')]);
  });

  it("bounds the delay outside a local run, refuses what is not whole milliseconds, and keeps a short one as it is", () => {
    expect(relaySettings(deployed({}))).toEqual({
      delayMs: DEFAULT_RELAY_DELAY_MS,
      fullBatchWaits: false,
      problems: [],
    });
    for (const kept of ["0", "250", String(MAX_RELAY_DELAY_MS)])
      expect(relaySettings(deployed({ RELAY_DELAY_MS: kept }))).toMatchObject({ delayMs: Number(kept), problems: [] });
    const hour = relaySettings(deployed({ RELAY_DELAY_MS: "3600000" }));
    expect(hour.delayMs).toBe(MAX_RELAY_DELAY_MS);
    expect(hour.problems).toEqual([
      expect.stringContaining(`RELAY_DELAY_MS is 3600000, over the ${MAX_RELAY_DELAY_MS} ms`),
    ]);
    // The bench's held-back receiver: an hour, and full batches waiting too, in a local run.
    expect(relaySettings(local({ RELAY_DELAY_MS: "3600000", RELAY_HELD_BACK: "1" }))).toEqual({
      delayMs: 3_600_000,
      fullBatchWaits: true,
      problems: [],
    });
    expect(relaySettings(local({ RELAY_DELAY_MS: String(MAX_LOCAL_RELAY_DELAY_MS + 1) })).delayMs).toBe(
      MAX_LOCAL_RELAY_DELAY_MS,
    );
    for (const bad of ["-5", "1e3", "2.5", "soon", " 250"]) {
      const refused = relaySettings(deployed({ RELAY_DELAY_MS: bad }));
      expect(refused.delayMs, bad).toBe(DEFAULT_RELAY_DELAY_MS);
      expect(refused.problems, bad).toEqual([expect.stringContaining("it takes whole milliseconds")]);
    }
  });

  it("keeps a deployed relay on time: the bound is inside the late-relay threshold", () => {
    expect(MAX_RELAY_DELAY_MS * 2).toBeLessThanOrEqual(LATE_RELAY_MS);
  });
});

describe("a refused relay setting", () => {
  const health = async (vars: Record<string, string | undefined>) =>
    (
      await app.fetch(new Request("https://receiver.test/health"), {
        ...env,
        LOCAL_DEVELOPMENT: undefined,
        ...vars,
      } as unknown as Env)
    ).json<{ status: string; reasons?: string[] }>();

  it("is named by /health and explained by /admin/api/health; settings it honours are not", async () => {
    for (const vars of [
      { RELAY_HELD_BACK: "1" },
      { RELAY_HELD_BACK: "0 " },
      { RELAY_DELAY_MS: "3600000" },
      { RELAY_DELAY_MS: "ten" },
    ]) {
      const answer = await health(vars);
      expect(answer.status, JSON.stringify(vars)).toBe("degraded");
      expect(answer.reasons, JSON.stringify(vars)).toContain("relay-settings-refused");
    }
    for (const vars of [
      { RELAY_HELD_BACK: "0" },
      { RELAY_HELD_BACK: "false" },
      { RELAY_DELAY_MS: "250" },
      { RELAY_HELD_BACK: "1", LOCAL_DEVELOPMENT: "true" },
    ]) {
      expect((await health(vars)).reasons ?? [], JSON.stringify(vars)).not.toContain("relay-settings-refused");
    }
    const details = await app.fetch(
      new Request("https://receiver.test/admin/api/health?source=demo", {
        headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
      }),
      { ...env, RELAY_HELD_BACK: "1" } as unknown as Env,
    );
    expect(details.status).toBe(200);
    expect(await details.json()).toMatchObject({
      relaySettings: [expect.stringContaining("RELAY_HELD_BACK is for local runs only")],
    });
  });
});
