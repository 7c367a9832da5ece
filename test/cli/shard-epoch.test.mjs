/**
 * `check` reads [vars.CLAIM_SHARD_PREVIOUS] (a shard epoch, docs/operating.md "Changing the shard count or a
 * source's placement") with the Worker's own parser: a value it does not understand fails, a declared epoch is a
 * reminder of when to remove it.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { cli, makeWorkDir, testConfig, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => rmSync(workDir, { recursive: true, force: true }));

describe("check and CLAIM_SHARD_PREVIOUS", () => {
  test("fails on a value the Worker would not understand, and says when a declared epoch can go", async () => {
    const broken = writeFile(
      workDir,
      "broken.toml",
      `${testConfig(9)}\n[vars.CLAIM_SHARD_PREVIOUS]\nshards = 0\nsince = "last tuesday"\n`,
    );
    const refused = await cli(["check", "--config-only", "--config", broken]);
    assert.equal(refused.code, 1, refused.stdout + refused.stderr);
    assert.match(refused.stdout, /^FAIL\s+CLAIM_SHARD_PREVIOUS\.shards is 0: it takes the shard count being left/m);
    assert.match(refused.stdout, /^FAIL\s+CLAIM_SHARD_PREVIOUS\.since is "last tuesday": it takes the date/m);

    const declared = writeFile(
      workDir,
      "declared.toml",
      `${testConfig(9)}\n[vars.CLAIM_SHARD_PREVIOUS]\nshards = 4\nsince = "2026-12-04T18:00:00Z"\n`,
    );
    const accepted = await cli(["check", "--config-only", "--config", declared]);
    assert.equal(accepted.code, 0, accepted.stdout + accepted.stderr);
    assert.match(
      accepted.stdout,
      /^warn\s+CLAIM_SHARD_PREVIOUS declares a shard epoch since 2026-12-04T18:00:00\.000Z \(4 shards before\): remove it once GET \/admin\/api\/health answers shardEpoch\.removable: true/m,
    );
  });
});
