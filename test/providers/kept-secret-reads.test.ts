import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { EMPTY_TTL_MS, REREAD_INTERVAL_MS } from "../../src/ingest/kept-secret-reads";
import { asanaDelivery, asanaHandshake } from "./support/asana-kept";
import { expectAccepted, uniqueKey } from "./support/contract";

/**
 * What a delivery to a kept-secret source (Asana, Notion) costs in D1 when its signature is forged: a cached list
 * that verifies nothing is re-read at most once per REREAD_INTERVAL_MS, and an empty answer is cached for
 * EMPTY_TTL_MS, so a flood of forgeries costs one read per interval rather than one per delivery. The clock is
 * pinned, so "within the interval" is a fact of the test, not a race against the machine.
 */

/** The real D1, with every statement that reads kept secrets counted on the way through. */
function countingKeptSecretReads() {
  let reads = 0;
  const DB = new Proxy(env.DB, {
    get(target, property) {
      if (property === "prepare")
        return (query: string) => {
          if (query.includes("handshake_secrets")) reads += 1;
          return target.prepare(query);
        };
      const value = Reflect.get(target, property);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { env: { ...env, DB } as Env, reads: () => reads };
}

async function forgedDeliveries(source: string, count: number, testEnv: Env): Promise<number[]> {
  const statuses: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const { body, headers } = asanaDelivery(uniqueKey("forged"));
    const response = await app.fetch(
      new Request(`https://receiver.test/webhooks/${source}`, { method: "POST", body, headers }),
      testEnv,
    );
    await response.body?.cancel();
    statuses.push(response.status);
  }
  return statuses;
}

afterEach(() => {
  vi.useRealTimers();
});

describe("kept secrets: what forged deliveries cost in D1", () => {
  it("25 forged deliveries to a source with an active secret cost no read within the interval, one after it", async () => {
    const source = "ks-asana-reads";
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.parse("2026-12-04T10:00:00Z"));
    const genuine = uniqueKey("asana_reads");
    expect((await asanaHandshake(source, genuine)).status).toBe(200);
    await expectAccepted(source, asanaDelivery(genuine));

    const counted = countingKeptSecretReads();
    expect(await forgedDeliveries(source, 25, counted.env)).toEqual(Array(25).fill(401));
    expect(counted.reads()).toBe(0);

    // Past the interval, one forgery may look for a hook registered elsewhere since; the next 24 may not.
    vi.setSystemTime(Date.parse("2026-12-04T10:00:00Z") + REREAD_INTERVAL_MS);
    expect(await forgedDeliveries(source, 25, counted.env)).toEqual(Array(25).fill(401));
    expect(counted.reads()).toBe(1);
    await expectAccepted(source, asanaDelivery(genuine));
  });

  it("an empty answer is cached for a moment: 25 forgeries cost one read, and a secret kept elsewhere is seen after", async () => {
    const source = "ks-asana-reads-empty";
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.parse("2026-12-04T11:00:00Z");
    vi.setSystemTime(start);
    const counted = countingKeptSecretReads();
    expect(await forgedDeliveries(source, 25, counted.env)).toEqual(Array(25).fill(401));
    expect(counted.reads()).toBe(1);

    // Another isolate kept the sender's first secret meanwhile: written straight to D1, as its handshake would.
    const genuine = uniqueKey("asana_elsewhere");
    await env.DB.prepare(
      "INSERT INTO handshake_secrets (source, secret, received_at, status) VALUES (?, ?, ?, 'active')",
    )
      .bind(source, genuine, start)
      .run();
    vi.setSystemTime(start + EMPTY_TTL_MS);
    await expectAccepted(source, asanaDelivery(genuine));
  });
});
