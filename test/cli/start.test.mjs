/**
 * `npm start` (scripts/dev.mjs) as a newcomer runs it: `--port` picks the port, a port already taken is one line
 * saying how to pick another, and the first run's migrations print a summary rather than their tables.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, test } from "node:test";
import {
  answering,
  freePort,
  makeWorkDir,
  startDevScript,
  testConfig,
  testDevVars,
  WAIT,
  writeFile,
} from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => rmSync(workDir, { recursive: true, force: true }));

/** `npm start` as a person runs it, with this file's own wrangler registry. */
const start = (/** @type {string[]} */ args, /** @type {Record<string, string>} */ extraEnv = {}) =>
  startDevScript(workDir, args, extraEnv);

/** The files a started receiver reads: this test's own config, secrets and state, never the checkout's. */
function projectArgs() {
  const config = writeFile(workDir, "wrangler.toml", testConfig(1));
  const vars = writeFile(workDir, ".dev.vars", testDevVars());
  return [
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
  ];
}

async function occupiedPort() {
  const server = createServer();
  await new Promise((done) => server.listen(0, "127.0.0.1", () => done(undefined)));
  return {
    port: /** @type {import("node:net").AddressInfo} */ (server.address()).port,
    close: () => new Promise((done) => server.close(done)),
  };
}

test("--port runs the receiver on that port, and the migrations print a summary, not their tables", async () => {
  const port = await freePort();
  const run = start(["--port", String(port), "--inspector-port", String(await freePort()), ...projectArgs()]);
  try {
    await answering(run, port);
    const { stdout, stderr } = run.output();
    assert.doesNotMatch(stderr, /expects a single value/);
    assert.match(stdout, /^migrations: DB up to date \(\d+ applied\)$/m);
    assert.doesNotMatch(stdout, /│|┌|Migrations to be applied/, "no migration tables");
  } finally {
    await run.stop();
  }
});

test("a port already taken is one line naming it and how to pick another, before anything else runs", async () => {
  const taken = await occupiedPort();
  try {
    for (const [args, env] of /** @type {[string[], Record<string, string>][]} */ ([
      [["--port", String(taken.port)], {}],
      [[], { PORT: String(taken.port) }],
    ])) {
      const run = start([...args, ...projectArgs()], env);
      // The deadline is cleared once the script exits: a pending 300 s timer would hold this file's process open
      // (and the CLI lane with it) long after its last test passed.
      let deadline;
      const code = await Promise.race([
        run.exited,
        new Promise((done) => {
          deadline = setTimeout(() => done("still running"), WAIT.command);
        }),
      ]);
      clearTimeout(deadline);
      await run.stop();
      const { stdout, stderr } = run.output();
      assert.equal(code, 1, `${stdout}${stderr}`);
      assert.match(
        stderr.trim(),
        new RegExp(
          `^port ${taken.port} is in use \\(another npm start\\?\\): stop it, or run npm start -- --port \\d+$`,
        ),
      );
      assert.doesNotMatch(stdout, /migrations/, "refused before migrating");
    }
  } finally {
    await taken.close();
  }
});
