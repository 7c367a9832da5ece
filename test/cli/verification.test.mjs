/**
 * `check` against a real receiver (`wrangler dev`) while a source rotates its secret: the source lists
 * CLI_ROT_NEW first and keeps CLI_ROT_OLD, the sender still signs with the old one, and check prints, from the
 * receiver's verification health (docs/operating.md), that the old secret still verifies the deliveries and the new
 * one nothing yet. A source with one secret asks nothing of the receiver.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { standardWebhookHeaders } from "../../scripts/lib/signed-delivery.mjs";
import {
  cli,
  freePort,
  makeWorkDir,
  startReceiver,
  stopLeftoverCommands,
  testConfig,
  testDevVars,
  writeFile,
} from "./receiver.mjs";

const workDir = makeWorkDir();
const OLD_SECRET = `whsec_${randomBytes(32).toString("base64")}`;
const NEW_SECRET = `whsec_${randomBytes(32).toString("base64")}`;
/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
let project = /** @type {string[]} */ ([]);

before(async () => {
  const config = `${testConfig(await freePort())}\n[vars.SOURCES.cli-rotation]\nprovider = "standard-webhooks"\nsecrets = ["CLI_ROT_NEW", { name = "CLI_ROT_OLD", expires = "2099-01-01T00:00:00Z" }]\ndestination = "none"\n`;
  const configPath = writeFile(workDir, "wrangler.toml", config);
  // LOCAL_DEVELOPMENT: the dev server counts deliveries by secret itself (no Analytics Engine to read back).
  const envFile = writeFile(
    workDir,
    ".dev.vars",
    `${testDevVars()}CLI_ROT_NEW="${NEW_SECRET}"\nCLI_ROT_OLD="${OLD_SECRET}"\nLOCAL_DEVELOPMENT="true"\n`,
  );
  receiver = await startReceiver({ configPath, envFile, workDir });
  project = ["--config", configPath, "--dev-vars", envFile];
});

after(async () => {
  stopLeftoverCommands();
  await receiver?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

describe("check during a rotation", () => {
  test("warns which secret still verifies, by name only, from the receiver's counts and last uses", async () => {
    for (const index of [1, 2]) {
      const body = JSON.stringify({ type: "rotation.test", index });
      const response = await fetch(`${receiver.url}/webhooks/cli-rotation`, {
        method: "POST",
        body,
        headers: standardWebhookHeaders(
          OLD_SECRET,
          `msg_cli_rotation_${index}_${randomBytes(4).toString("hex")}`,
          body,
        ),
      });
      assert.equal(response.status, 200);
    }
    const result = await cli(["check", ...project], { RECEIVER_URL: receiver.url });
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(
      result.stdout,
      /^warn\s+source cli-rotation: `CLI_ROT_OLD` still verifies 100 % of deliveries; last used within the last hour$/m,
    );
    assert.match(
      result.stdout,
      /^warn\s+source cli-rotation: `CLI_ROT_NEW` \(the current secret\) has verified nothing yet: the sender still signs with an older one$/m,
    );
    assert.doesNotMatch(result.stdout + result.stderr, new RegExp(OLD_SECRET.slice(6, 30).replace(/[+/]/g, ".")));
    // Sources with one secret each: nothing to ask.
    assert.doesNotMatch(result.stdout, /^(ok|warn)\s+source cli-(?!rotation)/m);
  });
});
