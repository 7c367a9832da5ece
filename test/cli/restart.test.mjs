/**
 * A restart of `npm start` keeps pending work moving: wrangler dev's queue lives in memory and loses every message
 * when it stops, so the retry of an event whose destination was down would wait for the cron's re-drive (10 min in
 * D1, and this run has no cron at all). After the restart, scripts/dev.mjs asks the Worker to send it again.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import {
  answering,
  cli,
  cliProcess,
  freePort,
  makeWorkDir,
  startDevScript,
  stopLeftoverCommands,
  testConfig,
  testDevVars,
  WAIT,
  writeFile,
} from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => {
  stopLeftoverCommands();
  rmSync(workDir, { recursive: true, force: true });
});

test("a retry pending when npm start stops is delivered soon after it starts again, not at the cron's re-drive", {
  timeout: 900_000,
}, async () => {
  const echoPort = await freePort(); // nothing listens there until after the restart: the destination is down
  const config = writeFile(workDir, "wrangler.toml", testConfig(echoPort));
  const vars = writeFile(workDir, ".dev.vars", `${testDevVars()}LOCAL_DEVELOPMENT="true"\n`);
  const project = ["--config", config, "--dev-vars", vars];
  const port = await freePort();
  const env = { RECEIVER_URL: `http://127.0.0.1:${port}` };
  // --no-cron: nothing but the restart's requeue can send the retry again.
  const npmStart = async () =>
    startDevScript(workDir, [
      "--port",
      String(port),
      "--inspector-port",
      String(await freePort()),
      "--config",
      config,
      "--env-file",
      vars,
      "--persist-to",
      join(workDir, "state"),
      "--no-cron",
      "--ip",
      "127.0.0.1",
      "--show-interactive-dev-session=false",
    ]);

  let run = await npmStart();
  try {
    await answering(run, port);
    const sent = await cli(["send", "cli-forward", ...project], env);
    const receipt = /"receipt":"(\w+)"/.exec(sent.stdout)?.[1];
    assert.ok(receipt, `not accepted:\n${sent.stdout}${sent.stderr}`);
    // The first attempt fails (connection refused) and a retry is scheduled about 30 s later.
    const deadline = Date.now() + WAIT.output;
    for (;;) {
      const shown = await cli(["show", receipt, ...project], env);
      if (/^status\s+pending/m.test(shown.stdout) && /next attempt due/.test(shown.stdout)) break;
      assert.ok(
        Date.now() < deadline,
        `no retry scheduled:\n${shown.stdout}${shown.stderr}\n${run.output().stdout.slice(-3000)}`,
      );
      await new Promise((done) => setTimeout(done, 500));
    }
    await run.stop();

    run = await npmStart();
    await answering(run, port);
    const echo = cliProcess(["echo", "--port", String(echoPort), ...project], env);
    await echo.waitFor(/echo backend on http:\/\/127\.0\.0\.1:\d+/);
    // Its retry was due within 30 s; the requeue asks every 10 s. Without it, nothing would ever come.
    await echo.waitFor(new RegExp(`receipt ${receipt}  source cli-forward`)).catch(async (error) => {
      const shown = await cli(["show", receipt, ...project], env);
      throw new Error(
        `${error.message}\nthe receipt:\n${shown.stdout}${shown.stderr}\nnpm start:\n${run.output().stdout.slice(-3000)}${run.output().stderr.slice(-2000)}`,
      );
    });
    assert.match(run.output().stdout, /"event":"local.requeued_after_restart","receipts":1\b/);
    assert.equal(await echo.interrupt(), 0);
  } finally {
    await run.stop();
  }
});
