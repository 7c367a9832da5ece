import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardAt, shardFor, shardIndex } from "../../src/claims/routing";
import {
  markDrained,
  rememberLayouts,
  retiredShards,
  SHIPPED_SHARD_COUNT,
  type ShardLayouts,
} from "../../src/claims/shard-layouts";
import { readCheckpoint } from "../../src/db/checkpoints";
import { SHARD_LAYOUTS_CHECKPOINT } from "../../src/reconcile/shard-layouts";
import { waitForStatus } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, claimWithLostAlarm, type RecordedRun, runCron, runsAt, unique } from "./support";

const SOURCE = "reconcile-stuck";
const DAY = 86_400_000;

/** This deployment with only SOURCE configured (a run visits its shards alone) and the given shard count. */
function deployment(shards: number): Env {
  const sources = env.SOURCES as Record<string, unknown>;
  return { ...env, CLAIM_SHARD_COUNT: String(shards), SOURCES: { [SOURCE]: sources[SOURCE] } };
}

async function cronRunUnder(runEnv: Env, now: number): Promise<RecordedRun> {
  await runCron(now, runEnv);
  const run = (await runsAt(now)).at(-1);
  if (!run) throw new Error(`no reconcile_runs row for clock ${now}`);
  return run;
}

/** An event key owned by a shard at `minIndex` or above under `shards`: gone from the claim path under fewer. */
function keyOnShardAtLeast(prefix: string, shards: number, minIndex: number): string {
  for (let attempt = 0; ; attempt++) {
    const eventKey = `${prefix}_${attempt}`;
    if (shardIndex(eventKey, shards) >= minIndex) return eventKey;
  }
}

describe("shards the config no longer names", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("are relayed by the cron after CLAIM_SHARD_COUNT goes from 16 to 4, though their alarm was lost, then forgotten once empty", async () => {
    const now = Date.now();
    const sixteen = deployment(16);
    const four = deployment(4);
    // A run under 16 shards: the deployment has used them.
    expect((await cronRunUnder(sixteen, now)).failures).toBeNull();

    // A claim on a shard past both 4 and the shipped 8, whose alarm is then lost: only a visit can relay it now.
    const eventKey = keyOnShardAtLeast(`msg_retired_${unique()}`, 16, SHIPPED_SHARD_COUNT);
    const stub = shardFor(sixteen, SOURCE, eventKey);
    await claimWithLostAlarm(stub, SOURCE, eventKey, now);
    expect(await stub.unrelayedCount()).toBe(1);

    // The operator lowers the count. The claim path never reaches that shard again; the cron's run still does.
    const shrunk = await cronRunUnder(four, now + 1);
    expect(shrunk.failures).toBeNull();
    expect(await stub.unrelayedCount()).toBe(0);
    expect(shrunk.counts.shards.claimsRelayed).toBe(1);
    // Shards 4..15 were all still to visit; every one but the claim's held nothing, and is not visited again.
    expect(shrunk.counts.shards).toMatchObject({ retiredShards: 12, retiredShardsDrained: 11 });
    expect(await waitForStatus(SOURCE, eventKey, ["skipped"])).toBe("skipped");
    // The record comes down to the claim's shard, the highest still holding something.
    const held = shardIndex(eventKey, 16);
    expect(await layouts()).toEqual({
      [SOURCE]: { "": { shards: held + 1, drained: Array.from({ length: held - 4 }, (_, step) => 4 + step) } },
    });

    // Its tombstone is kept until the dedupe retention (35 days), like any shard's, and then forgotten.
    const early = await cronRunUnder(four, now + 2);
    expect(early.counts.shards).toMatchObject({ retiredShards: 1, retiredShardsDrained: 0, shardKeysExpired: 0 });
    const late = await cronRunUnder(four, now + 36 * DAY);
    expect(late.counts.shards).toMatchObject({ retiredShards: 1, retiredShardsDrained: 1, shardKeysExpired: 1 });
    expect(await stub.tombstone(SOURCE, eventKey)).toBeNull();
    // Nothing is left to visit: the record is back to the four shards in use.
    expect(await layouts()).toEqual({ [SOURCE]: { "": { shards: 4, drained: [] } } });
    const after = await cronRunUnder(four, now + 36 * DAY + 1);
    expect(after.counts.shards).toMatchObject({ retiredShards: 0, shardsTotal: 4 });
  });
});

describe("a config the cron cannot fully read", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("retires no shard of a source whose table is broken, nor any when SOURCES itself is unreadable", async () => {
    const clock = Date.now() + 100 * DAY;
    const four = deployment(4);
    expect((await cronRunUnder(four, clock)).failures).toBeNull();
    const before = await layouts();
    expect(before?.[SOURCE]?.[""]).toEqual({ shards: 4, drained: [] });

    // SOURCE's table breaks (it answers 503 until fixed): its shards are out of service, not retired.
    const brokenTable = { ...four, SOURCES: { [SOURCE]: { provider: "no-such-provider" } } };
    const withBrokenTable = await cronRunUnder(brokenTable, clock + 1);
    expect(withBrokenTable.counts.shards).toMatchObject({ retiredShards: 0, retiredShardsDrained: 0 });
    expect(await layouts()).toEqual(before);

    // SOURCES is not a table at all: the run records its config failure and leaves the record alone.
    const unreadable = { ...four, SOURCES: "not a table" as unknown as object };
    const withUnreadable = await cronRunUnder(unreadable, clock + 2);
    expect(withUnreadable.failures).toEqual(expect.arrayContaining([expect.objectContaining({ step: "config" })]));
    expect(withUnreadable.counts.shards).toMatchObject({ shardsVisited: 0, retiredShards: 0 });
    expect(await layouts()).toEqual(before);
  });
});

async function layouts(): Promise<ShardLayouts | null> {
  return readCheckpoint<ShardLayouts>(env, "*", SHARD_LAYOUTS_CHECKPOINT);
}

describe("a retired shard's stub", () => {
  it("is asked of its old jurisdiction's namespace, by its name, with no location hint", () => {
    // Local workerd throws on jurisdiction(): a namespace that records the asks and hands the real objects back.
    const asked: string[] = [];
    const recording = (scope: string): Env["CLAIM_SHARDS"] =>
      new Proxy(env.CLAIM_SHARDS, {
        get(target, property) {
          if (property === "jurisdiction") return (jurisdiction: string) => recording(jurisdiction);
          if (property === "idFromName") {
            return (name: string) => {
              asked.push(`${scope} ${name}`);
              return target.idFromName(name);
            };
          }
          if (property === "get") {
            return (shardId: DurableObjectId, options?: unknown) => {
              asked.push(`get ${JSON.stringify(options)}`);
              return target.get(shardId);
            };
          }
          return Reflect.get(target, property);
        },
      });
    shardAt({ CLAIM_SHARDS: recording("global") }, "placed-eu", "eu", 5);
    shardAt({ CLAIM_SHARDS: recording("global") }, "demo", null, 9);
    expect(asked).toEqual(["eu placed-eu#5", "get undefined", "global demo#9", "get undefined"]);
  });
});

describe("the record of shard layouts", () => {
  const current = (shards: number, jurisdiction: DurableObjectJurisdiction | null = null) => [
    { source: "shop", jurisdiction, shards },
  ];
  const indices = (known: ShardLayouts, shards: number, jurisdiction: DurableObjectJurisdiction | null = null) =>
    retiredShards(known, current(shards, jurisdiction)).map((shard) => `${shard.jurisdiction ?? "-"}#${shard.index}`);

  it("starts a source it has never seen at the shipped count, so shards used before the record began are visited", () => {
    const known = rememberLayouts({}, current(4));
    expect(known).toEqual({ shop: { "": { shards: SHIPPED_SHARD_COUNT, drained: [] } } });
    expect(indices(known, 4)).toEqual(["-#4", "-#5", "-#6", "-#7"]);
    expect(rememberLayouts({}, current(32)).shop![""]!.shards).toBe(32);
  });

  it("keeps the highest count seen, and a shard addressed again is no longer drained", () => {
    let known = rememberLayouts(rememberLayouts({}, current(16)), current(4));
    expect(known.shop![""]!.shards).toBe(16);
    known = markDrained(known, [{ source: "shop", jurisdiction: null, index: 9 }]);
    expect(indices(known, 4)).not.toContain("-#9");
    known = rememberLayouts(known, current(12));
    expect(indices(known, 12)).toEqual(["-#12", "-#13", "-#14", "-#15"]);
    expect(known.shop![""]!.drained).toEqual([]);
  });

  it("retires every shard of the old jurisdiction when it changes, and of a source no longer configured", () => {
    const known = rememberLayouts({}, current(8));
    expect(indices(rememberLayouts(known, current(8, "eu")), 8, "eu")).toEqual(
      Array.from({ length: 8 }, (_, index) => `-#${index}`),
    );
    expect(retiredShards(known, []).map((shard) => shard.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("comes back down to the count in use as the top shards drain, and forgets a layout drained to nothing", () => {
    let known = rememberLayouts(rememberLayouts({}, current(8)), current(8, "eu"));
    const retired = retiredShards(known, current(8, "eu"));
    known = markDrained(known, retired.slice(0, 7));
    expect(known.shop![""]).toEqual({ shards: 8, drained: [0, 1, 2, 3, 4, 5, 6] });
    known = markDrained(known, retired.slice(7));
    expect(known).toEqual({ shop: { eu: { shards: 8, drained: [] } } });
    expect(markDrained(rememberLayouts({}, current(8)), retiredShards(rememberLayouts({}, current(8)), []))).toEqual(
      {},
    );
  });
});
