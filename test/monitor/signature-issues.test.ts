import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { secretValue } from "../../src/lib/secrets";
import { signatureReportsSent } from "../../src/monitor/signature-tally";
import { CRON_TEST_TIMEOUT_MS, runCron, withOnlySources } from "../reconcile/support";
import { credit, signDemo } from "../support/deliveries";
import { issue } from "./issue-support";

/**
 * Signature-failure issues through the real route: deliveries refused by their signature check are counted in the
 * isolate's memory (src/monitor/signature-tally.ts), flushed to the system monitor at most once per interval (or by
 * the cron), and the monitor opens `signature-failures:<source>` past the thresholds (src/monitor/signature-spike.ts)
 * and resolves it when the refused share falls back. Good deliveries of a source never refused send nothing.
 */

const CURRENT = secretValue(env, "VH_CURRENT_SECRET")!;
const ROTATED_AWAY = "whsec_c2lnbmF0dXJlLWlzc3Vlcy1yb3RhdGVkLXNlY3JldC0zMmI=";
const runId = crypto.randomUUID().slice(0, 8);

/** One delivery through the real route, its waitUntil work (the tally's flush) awaited. */
async function deliver(source: string, eventKey: string, secret: string): Promise<number> {
  const body = JSON.stringify(credit(`acct_${eventKey}`, 1));
  const ctx = createExecutionContext();
  const answer = await app.fetch(
    new Request(`https://receiver.test/webhooks/${source}`, {
      method: "POST",
      body,
      headers: signDemo(eventKey, body, undefined, secret),
    }),
    env,
    ctx,
  );
  await answer.arrayBuffer();
  await waitOnExecutionContext(ctx);
  return answer.status;
}

async function deliverMany(source: string, prefix: string, count: number, secret: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let index = 0; index < count; index++) statuses.push(await deliver(source, `${prefix}_${index}`, secret));
  return statuses;
}

async function bucketsHeld(source: string): Promise<number> {
  const monitor = env.MONITOR.get(env.MONITOR.idFromName("system"));
  return runInDurableObject(monitor, async (_instance, state) => {
    const rows = state.storage.sql
      .exec<{ n: number }>("SELECT COUNT(*) AS n FROM signature_buckets WHERE source = ?", source)
      .toArray();
    return rows[0]?.n ?? 0;
  });
}

describe("signature-failure issues", { timeout: CRON_TEST_TIMEOUT_MS * 3 }, () => {
  it("good deliveries of a source never refused cost no monitor request and no row", async () => {
    const before = signatureReportsSent();
    const statuses = await deliverMany("sig-quiet", `sig_quiet_${runId}`, 30, CURRENT);
    expect(statuses).toEqual(Array(30).fill(200));
    expect(signatureReportsSent()).toBe(before);
    expect(await bucketsHeld("sig-quiet")).toBe(0);
  });

  it("opens when a source's deliveries fail their signature check past the thresholds, and resolves when the share falls back", async () => {
    const key = "signature-failures:sig-spike";
    // A handful of refusals is no spike: below the floor (10) nothing opens.
    expect(await deliverMany("sig-spike", `sig_few_${runId}`, 4, ROTATED_AWAY)).toEqual(Array(4).fill(401));
    await runCron(Date.now(), withOnlySources("sig-spike"));
    expect(await issue(key)).toBeUndefined();

    // The sender rotated its secret: everything it sends is refused.
    expect(await deliverMany("sig-spike", `sig_bad_${runId}`, 12, ROTATED_AWAY)).toEqual(Array(12).fill(401));
    // However many were refused, the isolate asked the monitor at most once per interval; the cron flushes the rest.
    await runCron(Date.now(), withOnlySources("sig-spike"));
    const open = await issue(key, false);
    expect(open).toMatchObject({ kind: "signature-failures", source: "sig-spike", route: null, state: "open" });
    expect(open!.severity).toBe("critical");
    expect(open!.message).toBe(
      "16 deliveries of 16 (100 %) failed the signature check in the last 15 minutes (signature-mismatch 16): " +
        "if the sender rotated its secret, add the new one to the source's secrets.",
    );

    // The secret is updated: good deliveries bring the refused share under 20 %, and the next run resolves it.
    expect(await deliverMany("sig-spike", `sig_good_${runId}`, 70, CURRENT)).toEqual(Array(70).fill(200));
    await runCron(Date.now(), withOnlySources("sig-spike"));
    const resolved = await issue(key);
    expect(resolved).toMatchObject({ state: "resolved", resolvedBy: "receiver" });
    expect(resolved!.history.map((entry) => entry.event)).toEqual(["opened", "resolved"]);
  });
});
