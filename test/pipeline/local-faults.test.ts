import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { readStoredBodies } from "../../src/bodies/stored-bodies";
import worker from "../../src/index";
import { meteredD1 } from "../../src/lib/meter";
import { credit, deliverDemo, waitForStatus } from "../support/deliveries";

/**
 * The faulted soak's outage switch (src/lib/local-faults.ts), asked the way the bench asks it: through the Worker's
 * scheduled handler with a `local-fault:` cron string. A deployed Worker (no LOCAL_DEVELOPMENT) must refuse it and
 * keep D1 and R2 working; a local run gets a real outage on our own D1 and R2 paths, and the ack path answers 2xx
 * through it.
 */

function ask(cron: string, vars: Record<string, string | undefined>) {
  return worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron }), {
    ...env,
    ...vars,
  } as unknown as Env);
}

const deployed = { LOCAL_DEVELOPMENT: undefined };
const local = { LOCAL_DEVELOPMENT: "true" };

/** One D1 call and one bucket read through our own metered/bodies paths: resolves when neither is out. */
async function d1Answers(): Promise<boolean> {
  return meteredD1(env.DB)
    .prepare("SELECT 1 AS one")
    .all()
    .then(
      () => true,
      () => false,
    );
}
async function r2Answers(): Promise<boolean> {
  return readStoredBodies(env, ["no-such-receipt"]).then(
    () => true,
    () => false,
  );
}

describe("the local outage switch", () => {
  it("is refused outside a local run, and switches nothing", async () => {
    for (const vars of [deployed, { LOCAL_DEVELOPMENT: "yes" }, { LOCAL_DEVELOPMENT: "false" }]) {
      await expect(ask("local-fault:d1:60000", vars)).rejects.toThrow(/wrangler dev only/);
      await expect(ask("local-fault:r2:60000", vars)).rejects.toThrow(/wrangler dev only/);
    }
    expect(await d1Answers()).toBe(true);
    expect(await r2Answers()).toBe(true);
  });

  it("refuses a fault it does not know, even locally", async () => {
    await expect(ask("local-fault:queue:1000", local)).rejects.toThrow(/names no local fault/);
    await expect(ask("local-fault:d1:soon", local)).rejects.toThrow(/names no local fault/);
    expect(await d1Answers()).toBe(true);
  });

  it("locally takes D1 away while acknowledgements go on, and nothing is lost once it is back", async () => {
    const eventKey = `evt_local_fault_${crypto.randomUUID()}`;
    const accountId = `acct_local_fault_${crypto.randomUUID()}`;
    await ask("local-fault:d1:60000", local);
    try {
      expect(await d1Answers()).toBe(false);
      expect(await r2Answers()).toBe(true);
      // Durable before 2xx means durable in the claim shard: D1 is not on the acknowledgement path.
      expect((await deliverDemo(eventKey, credit(accountId, 7))).status).toBe(200);
    } finally {
      await ask("local-fault:d1:0", local);
    }
    expect(await d1Answers()).toBe(true);
    expect(await waitForStatus("demo", eventKey)).toBe("processed");
  });

  it("locally takes R2 away for its duration only", async () => {
    await ask("local-fault:r2:60000", local);
    try {
      expect(await r2Answers()).toBe(false);
      expect(await d1Answers()).toBe(true);
    } finally {
      await ask("local-fault:r2:0", local);
    }
    expect(await r2Answers()).toBe(true);
  });
});
