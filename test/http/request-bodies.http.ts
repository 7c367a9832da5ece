/**
 * Request bodies against the Worker running under `wrangler dev`: the real HTTP stack (wrangler's proxy in front
 * of workerd) rather than a Request built inside the test pool. Over-cap chunked uploads racing each other must
 * all get their 413, not a reset or a 500 from the proxy. Node-side (run by `npm run test:http`), because wrangler
 * is a process the workerd test pool cannot start.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { standardWebhookHeaders } from "../../scripts/lib/signed-delivery.mjs";
import { copyMigratedState } from "../cli/migrated-state.mjs";

const WRANGLER = join(process.cwd(), "node_modules", ".bin", "wrangler");
const DEMO_SECRET = `whsec_${Buffer.from(`http-demo-secret-${crypto.randomUUID()}`).toString("base64")}`;
const DEFAULT_CAP = 1024 * 1024;
/** `wrangler dev` answering /health: generous, since a loaded machine (a load of 8 and more on 2 cores) takes minutes. */
const RECEIVER_START_MS = 300_000;

const workDir = mkdtempSync(join(tmpdir(), "receiver-http-"));
const persistTo = join(workDir, "state");
const envFile = join(workDir, ".dev.vars");
let worker: ChildProcess | undefined;
let workerLog = "";
let port = 0;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port: chosen } = server.address() as { port: number };
      server.close(() => resolve(chosen));
    });
  });
}

const wranglerEnv = () => ({
  ...process.env,
  CI: "true",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_REGISTRY_PATH: `${persistTo}-registry`,
});

async function waitForHealth(timeoutMs = RECEIVER_START_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (worker?.exitCode !== null && worker?.exitCode !== undefined)
      throw new Error(`wrangler dev exited:\n${workerLog}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`wrangler dev did not answer within ${timeoutMs} ms:\n${workerLog}`);
}

interface Answer {
  status: number;
  body: string;
}

/**
 * POSTs `totalBytes` as a chunked stream (no Content-Length), written a chunk at a time the way a slow sender
 * would, and stops writing once the answer arrives. The answer is whatever came back, or the transport error.
 */
function chunkedUpload(eventKey: string, totalBytes: number, chunkBytes = 64 * 1024): Promise<Answer> {
  const body = JSON.stringify({
    type: "account.credited",
    data: { account: "acct_http_cap", amount: 1 },
    padding: "x".repeat(totalBytes),
  });
  const bytes = Buffer.from(body);
  const headers = standardWebhookHeaders(DEMO_SECRET, eventKey, body);
  return new Promise((resolve) => {
    let answered = false;
    const finish = (answer: Answer) => {
      if (!answered) {
        answered = true;
        resolve(answer);
      }
    };
    const outgoing = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/webhooks/demo",
        headers: { ...headers, "transfer-encoding": "chunked" },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (text += chunk));
        response.on("end", () => finish({ status: response.statusCode ?? 0, body: text }));
        response.on("error", (error) => finish({ status: 0, body: `response error: ${error.message}` }));
      },
    );
    outgoing.on("error", (error) => finish({ status: 0, body: `transport error: ${error.message}` }));
    let offset = 0;
    const writeNext = () => {
      if (answered || outgoing.destroyed) return;
      if (offset >= bytes.length) {
        outgoing.end();
        return;
      }
      const chunk = bytes.subarray(offset, offset + chunkBytes);
      offset += chunk.length;
      if (outgoing.write(chunk)) setImmediate(writeNext);
      else outgoing.once("drain", writeNext);
    };
    writeNext();
  });
}

before(async () => {
  port = await freePort();
  const inspectorPort = await freePort();
  writeFileSync(
    envFile,
    `DEMO_WEBHOOK_SECRET="${DEMO_SECRET}"\nGATEWAY_SIGNING_SECRET="whsec_Z2F0ZXdheS1odHRwLXRlc3Q="\nADMIN_TOKEN="http-test-admin-${crypto.randomUUID()}"\n`,
  );
  // DB migrated by wrangler once per set of migrations, not once per run (test/cli/migrated-state.mjs).
  copyMigratedState(process.cwd(), persistTo, wranglerEnv());
  worker = spawn(
    WRANGLER,
    [
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      String(inspectorPort),
      "--persist-to",
      persistTo,
      "--env-file",
      envFile,
      "--show-interactive-dev-session=false",
      "--log-level",
      "warn",
    ],
    // Its own dev registry, so another local wrangler dev session cannot take this one's queue messages.
    { detached: true, stdio: ["ignore", "pipe", "pipe"], env: wranglerEnv() },
  );
  worker.stdout?.on("data", (chunk: Buffer) => (workerLog += chunk.toString()));
  worker.stderr?.on("data", (chunk: Buffer) => (workerLog += chunk.toString()));
  await waitForHealth();
});

after(async () => {
  if (worker?.pid && worker.exitCode === null) {
    process.kill(-worker.pid, "SIGTERM");
    await new Promise((resolve) => worker!.once("exit", resolve));
  }
  rmSync(workDir, { recursive: true, force: true });
});

test("64 concurrent over-cap chunked uploads are all answered 413", async () => {
  const answers = await Promise.all(
    Array.from({ length: 64 }, (_, index) =>
      chunkedUpload(`msg_http_over_cap_${index}_${crypto.randomUUID()}`, 2 * DEFAULT_CAP),
    ),
  );
  const statuses = answers.map((answer) => answer.status);
  const wrong = answers.filter((answer) => answer.status !== 413);
  assert.deepEqual(
    wrong,
    [],
    `expected every upload to get 413, got ${JSON.stringify(statuses)}\n${workerLog.slice(-3000)}`,
  );
  for (const answer of answers)
    assert.equal((JSON.parse(answer.body) as { error: { code: string } }).error.code, "payload_too_large");
});
