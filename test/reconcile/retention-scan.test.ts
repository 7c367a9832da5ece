import { describe, expect, it } from "vitest";
import { shardIndex } from "../../src/claims/routing";
import { ulid, ulidFloor } from "../../src/lib/ulid";
import { bodyDropsAt, heldBodiesDue, MAX_KEPT_PER_SOURCE, shardKeepOf } from "../../src/reconcile/retention-scan";
import { shardPrune } from "../../src/reconcile/shard-keep";
import type { SourceConfig } from "../../src/sources/config";

const DAY = 86_400_000;
const T0 = 1_790_000_000_000;

describe("what the shards keep", () => {
  it("lists each undeleted receipt's claim keys, and past the cap checks only up to the first one left out", () => {
    const undeleted = Array.from({ length: MAX_KEPT_PER_SOURCE + 2 }, (_, index) => ({
      id: ulid(T0 + index),
      eventKey: `evt_${index}`,
      payloadSha256: `sha_${index}`,
    }));
    const few = shardKeepOf(undeleted.slice(0, 2), T0 + DAY);
    expect(few).toEqual({ checkedBefore: T0 + DAY, keys: ["evt_0", "sha_0", "evt_1", "sha_1"] });
    const many = shardKeepOf(undeleted, T0 + DAY);
    expect(many.checkedBefore).toBe(T0 + MAX_KEPT_PER_SOURCE);
    expect(many.keys).toHaveLength(2 * MAX_KEPT_PER_SOURCE);
    expect(many.keys).not.toContain(`evt_${MAX_KEPT_PER_SOURCE}`);
  });

  it("gives each shard its own keys and a cutoff no later than the scan checked; nothing before a scan", () => {
    const source = { dedupeRetentionMs: 35 * DAY } as SourceConfig;
    const now = T0 + 40 * DAY;
    const keys = Array.from({ length: 40 }, (_, index) => `evt_${index}`);
    const perShard = Array.from({ length: 8 }, (_, shard) =>
      shardPrune({ checkedBefore: T0, keys }, source, now, shard, 8),
    );
    expect(perShard.flatMap((prune) => prune.keepKeys).sort()).toEqual([...keys].sort());
    perShard.forEach((prune, shard) => prune.keepKeys.forEach((key) => expect(shardIndex(key, 8)).toBe(shard)));
    expect(perShard[0]!.keyCutoff).toBe(T0); // the scan lags the clock
    expect(shardPrune({ checkedBefore: now, keys: [] }, source, now, 0, 8).keyCutoff).toBe(now - 35 * DAY);
    expect(shardPrune(undefined, source, now, 0, 8)).toEqual({ keyCutoff: 0, keepKeys: [] });
  });
});

describe("held bodies", () => {
  it("drops a dead letter's past its own cutoff, a dismissed or finished replay's at once, never one under way", () => {
    const old = ulid(T0);
    const young = ulid(T0 + 10 * DAY);
    const page = [
      { id: old, status: "dead" },
      { id: young, status: "dead" },
      { id: ulid(T0 + 1), status: "dismissed" },
      { id: ulid(T0 + 2), status: "processed" },
      { id: ulid(T0 + 3), status: "pending" },
      { id: ulid(T0 + 4), status: "processing" },
    ];
    expect(heldBodiesDue(page, ulidFloor(T0 + 5 * DAY))).toEqual({ dead: [old], finished: [page[2]!.id, page[3]!.id] });
  });

  it("says when a body goes: dead-letter retention for a dead letter, payload retention for the finished, never for work under way", () => {
    const retention = { payloadRetentionMs: 7 * DAY, deadLetterRetentionMs: 20 * DAY };
    const receipt = (status: string, bodyRetained = true) => ({ status, receivedAt: T0, bodyRetained });
    expect(bodyDropsAt(receipt("dead"), retention)).toBe(T0 + 20 * DAY);
    for (const status of ["processed", "stale", "skipped", "dismissed"])
      expect(bodyDropsAt(receipt(status), retention)).toBe(T0 + 7 * DAY);
    for (const status of ["pending", "processing"]) expect(bodyDropsAt(receipt(status), retention)).toBeNull();
    expect(bodyDropsAt(receipt("dead", false), retention)).toBeNull();
    expect(bodyDropsAt(receipt("dead"), null)).toBeNull();
  });
});
