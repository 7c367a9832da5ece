/**
 * The dashboard, end to end in a real browser: Debian's chromium driven by playwright-core against the Worker
 * running under `wrangler dev` with its own on-disk D1, Durable Objects and queue. Node-side (run by
 * `npm run test:browser`), because the browser and wrangler are processes the workerd test pool cannot start.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { standardWebhookHeaders } from "../../scripts/lib/signed-delivery.mjs";
import { copyMigratedState } from "../cli/migrated-state.mjs";

/** A port the OS says is free now: runs on one machine must not collide on a fixed one. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const PORT = process.env.ADMIN_BROWSER_PORT ? Number(process.env.ADMIN_BROWSER_PORT) : await freePort();
const INSPECTOR_PORT = await freePort();
const BASE = `http://127.0.0.1:${PORT}`;
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const WRANGLER = join(process.cwd(), "node_modules", ".bin", "wrangler");
/**
 * How long the test waits, named once and generous: it asserts what happens, never how fast, and a loaded machine
 * (a load of 8 and more on 2 cores) is many times slower than a quiet one.
 */
const WAIT = {
  /** `wrangler dev` answering /health. */
  receiverStart: 300_000,
  /** The pipeline finishing an event, or the cron opening an issue. */
  pipeline: 120_000,
};
const ADMIN_TOKEN = `browser-test-admin-${crypto.randomUUID()}`;
const DEMO_SECRET = `whsec_${Buffer.from(`browser-demo-secret-${crypto.randomUUID()}`).toString("base64")}`;
export const SCREENSHOTS = process.env.SCREENSHOT_DIR ?? join(tmpdir(), "admin-dashboard-screenshots");

const workDir = mkdtempSync(join(tmpdir(), "admin-browser-"));
const persistTo = join(workDir, "state");
const envFile = join(workDir, ".dev.vars");
let worker: ChildProcess | undefined;
let workerLog = "";
let context: BrowserContext | undefined;
const requestedUrls: string[] = [];

function wrangler(args: string[]): string {
  return execFileSync(WRANGLER, args, {
    encoding: "utf8",
    env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** One SQL statement on the local `DB`, as an operator runs it (`--json` for the rows). */
function d1Execute(command: string, options: { json?: boolean } = {}): string {
  return wrangler([
    "d1",
    "execute",
    "DB",
    "--local",
    "--persist-to",
    persistTo,
    ...(options.json ? ["--json"] : []),
    "--command",
    command,
  ]);
}

async function waitForHealth(timeoutMs = WAIT.receiverStart): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (worker?.exitCode !== null && worker?.exitCode !== undefined)
      throw new Error(`wrangler dev exited:\n${workerLog}`);
    try {
      if ((await fetch(`${BASE}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`wrangler dev did not answer on ${BASE} within ${timeoutMs} ms:\n${workerLog}`);
}

async function deliver(eventKey: string, payload: unknown): Promise<{ status: string; receipt: string }> {
  const body = JSON.stringify(payload);
  const response = await fetch(`${BASE}/webhooks/demo`, {
    method: "POST",
    body,
    headers: standardWebhookHeaders(DEMO_SECRET, eventKey, body),
  });
  assert.equal(response.status, 200, `delivery ${eventKey} answered ${response.status}`);
  return (await response.json()) as { status: string; receipt: string };
}

async function adminApi<T>(path: string): Promise<T> {
  const response = await fetch(`${BASE}/admin/api${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(response.status, 200, `GET /admin/api${path} answered ${response.status}`);
  return (await response.json()) as T;
}

async function waitForStatus(receiptId: string, statuses: string[], minAttempts = 1): Promise<void> {
  const deadline = Date.now() + WAIT.pipeline;
  for (;;) {
    const detail = await adminApi<{ receipt: { status: string }; attempts: unknown[] }>(`/receipts/${receiptId}`).catch(
      () => null,
    );
    if (detail && statuses.includes(detail.receipt.status) && detail.attempts.length >= minAttempts) return;
    if (Date.now() > deadline)
      throw new Error(`receipt ${receiptId} never reached ${statuses.join("|")}:\n${workerLog.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

const events = {
  credited: `msg_browser_credit_${crypto.randomUUID()}`,
  plan: `msg_browser_plan_${crypto.randomUUID()}`,
  broken: `msg_browser_broken_${crypto.randomUUID()}`,
};
const receipts: Record<keyof typeof events, string> = { credited: "", plan: "", broken: "" };

before(async () => {
  assert.ok(existsSync(CHROMIUM), `chromium is missing at ${CHROMIUM}: run .ci/browser-deps.sh`);
  mkdirSync(SCREENSHOTS, { recursive: true });
  writeFileSync(
    envFile,
    `DEMO_WEBHOOK_SECRET="${DEMO_SECRET}"\nGATEWAY_SIGNING_SECRET="whsec_Z2F0ZXdheS1icm93c2VyLXRlc3Q="\nADMIN_TOKEN="${ADMIN_TOKEN}"\n`,
  );
  // DB migrated by wrangler once per set of migrations, not once per run (test/cli/migrated-state.mjs).
  copyMigratedState(process.cwd(), persistTo, { ...process.env });
  worker = spawn(
    WRANGLER,
    [
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(PORT),
      "--inspector-port",
      String(INSPECTOR_PORT),
      "--persist-to",
      persistTo,
      "--env-file",
      envFile,
      "--show-interactive-dev-session=false",
      // GET /__scheduled runs the cron, which opens the issues (docs/operating.md "Issues and notices").
      "--test-scheduled",
      "--log-level",
      "warn",
    ],
    {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        CI: "true",
        WRANGLER_SEND_METRICS: "false",
        // Its own dev registry: wrangler dev sessions sharing one would consume each other's queue messages.
        WRANGLER_REGISTRY_PATH: `${persistTo}-registry`,
      },
    },
  );
  worker.stdout?.on("data", (chunk: Buffer) => (workerLog += chunk.toString()));
  worker.stderr?.on("data", (chunk: Buffer) => (workerLog += chunk.toString()));
  await waitForHealth();

  receipts.credited = (
    await deliver(events.credited, { type: "account.credited", data: { account: "acct_0042", amount: 100 } })
  ).receipt;
  assert.equal(
    (await deliver(events.credited, { type: "account.credited", data: { account: "acct_0042", amount: 100 } })).status,
    "duplicate",
  );
  receipts.plan = (
    await deliver(events.plan, {
      type: "account.plan_changed",
      data: { account: "acct_0042", plan: "plan_v7", version: 7 },
    })
  ).receipt;
  receipts.broken = (
    await deliver(events.broken, { type: "account.credited", data: { account: "acct_0042", amount: "lots" } })
  ).receipt;
  await waitForStatus(receipts.credited, ["processed"]);
  await waitForStatus(receipts.plan, ["processed"]);
  await waitForStatus(receipts.broken, ["dead"]);
  // An alert, written the way an operator would look at one: straight into D1 with wrangler.
  d1Execute(
    `INSERT INTO alerts (id, source, kind, state, detail, opened_at) VALUES ('01KBROWSERALERT00000000001', 'demo', 'silence', 'open', '{"message":"The demo source has had no live delivery for 1 h.","facts":{"lastLive":0}}', ${Date.now()})`,
  );

  context = await chromium.launchPersistentContext(join(workDir, "profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1400, height: 900 },
  });
  context.on("request", (request) => requestedUrls.push(request.url()));
});

after(async () => {
  await context?.close();
  if (worker?.pid && worker.exitCode === null) {
    process.kill(-worker.pid, "SIGTERM");
    await new Promise((resolve) => worker!.once("exit", resolve));
  }
  rmSync(workDir, { recursive: true, force: true });
});

test("signing in: the token is refused when wrong, then traded for an HttpOnly session cookie", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin`);
  assert.equal(new URL(page.url()).pathname, "/admin/login");
  await page.fill("#token", "not-the-token");
  await page.click("button[type=submit]");
  assert.match((await page.textContent(".error")) ?? "", /not accepted/);

  await page.fill("#token", ADMIN_TOKEN);
  await page.click("button[type=submit]");
  await page.waitForURL(`${BASE}/admin`);
  const [session] = (await context!.cookies(`${BASE}/admin`)).filter((cookie) => cookie.name === "admin_session");
  assert.ok(session, "the session cookie is set");
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(session.sameSite, "Strict");
  assert.ok(!session.value.includes(ADMIN_TOKEN));
  assert.equal(
    await page.evaluate(() => document.cookie.includes("admin_session")),
    false,
    "scripts cannot read the session",
  );
  await page.close();
});

test("sources with their health, and open alerts", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin`);
  const demoRow = page.locator('#sources tr[data-source="demo"]');
  assert.equal(await demoRow.locator(".badge").textContent(), "failing");
  assert.equal((await demoRow.locator("td").nth(2).textContent())?.trim(), "3");
  assert.match((await page.locator("#alerts").textContent()) ?? "", /no live delivery for 1 h/);
  assert.doesNotMatch((await page.locator("#alerts").textContent()) ?? "", /"message"/);
  await shoot(page, "overview");

  await demoRow.locator("a").first().click();
  await page.waitForURL(`${BASE}/admin/sources/demo`);
  assert.equal(
    (await page.locator("#duplicates .value").textContent())?.trim(),
    "1",
    "one live duplicate counted by the claim shards",
  );
  assert.equal((await page.locator("#received .value").textContent())?.trim(), "3");
  // Charts drawn on the server: three received in the last 24 hours, one of them dead.
  assert.equal(await page.locator("#chart-received").getAttribute("data-total"), "3");
  assert.equal(await page.locator("#chart-dead").getAttribute("data-total"), "1");
  assert.ok((await page.locator("#chart-received svg rect.bar").count()) >= 1, "a bar for the current hour");
  assert.ok((await page.locator("#chart-pickup svg circle").count()) >= 1, "a pickup point for the current hour");
  assert.match((await page.locator("#chart-rejected").textContent()) ?? "", /Not stored in D1/);
  // Why it is failing, with a link to each cause.
  const reasons = page.locator("#health-reasons li");
  assert.deepEqual(await reasons.evaluateAll((items) => items.map((item) => item.getAttribute("data-reason"))), [
    "dead-letters",
    "open-alerts",
  ]);
  assert.equal(
    await page.locator('#health-reasons li[data-reason="dead-letters"] a').getAttribute("href"),
    "/admin/dead?source=demo",
  );
  await shoot(page, "source");
  await page.close();
});

test("charts keep their labels inside and draw every series' points; sparklines read as bars on a baseline", async () => {
  // A processing time of 80 ms puts "100 ms" on the processing chart's axis: written straight into D1, as no
  // demo consumer takes that long.
  d1Execute(`UPDATE receipts SET attempt_duration_ms = 80 WHERE id = '${receipts.credited}'`);
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/sources/demo`);
  assert.match((await page.locator("#chart-processing svg").textContent()) ?? "", /100 ms/);
  const outside = await page.locator("#charts svg").evaluateAll((charts) =>
    charts.flatMap((chart) => {
      const frame = chart.getBoundingClientRect();
      return Array.from(chart.querySelectorAll("text"))
        .filter((label) => {
          const box = label.getBoundingClientRect();
          return box.left < frame.left - 0.5 || box.right > frame.right + 0.5 || box.top < frame.top - 0.5;
        })
        .map((label) => `${chart.parentElement!.id}: "${label.textContent}"`);
    }),
  );
  const problems = outside.map((label) => `label cut off at the chart's edge: ${label}`);

  // One hour of data: each series is one point, which a path alone does not draw. The p95 mark must be seen
  // beside the p50 one, not hidden under it (with one sample they are equal).
  for (const id of ["chart-pickup", "chart-processing"]) {
    const marks = await page.locator(`#${id} svg`).evaluate((chart) => {
      const painted = (element: Element) => {
        const style = getComputedStyle(element);
        return (style.fill !== "none" || style.stroke !== "none") && style.visibility === "visible";
      };
      const boxes = (selector: string) =>
        Array.from(chart.querySelectorAll(selector))
          .filter(painted)
          .map((element) => element.getBoundingClientRect());
      const p50 = boxes(".p50");
      return boxes(".p95")
        .filter((box) => box.width > 0 && box.height > 0)
        .filter(
          (box) =>
            !p50.some(
              (cover) =>
                cover.left <= box.left &&
                cover.right >= box.right &&
                cover.top <= box.top &&
                cover.bottom >= box.bottom,
            ),
        ).length;
    });
    if (marks === 0) problems.push(`${id}: no visible p95 mark`);
  }

  await page.goto(`${BASE}/admin`);
  const spark = await page.locator('#sources tr[data-source="demo"] svg.spark').evaluate((svg) => {
    const frame = svg.getBoundingClientRect();
    const baseline = svg.querySelector(".baseline");
    const marks = Array.from(svg.querySelectorAll(":scope > :not(.baseline)")).map((mark) =>
      mark.getBoundingClientRect(),
    );
    const cell = svg.closest("td")!;
    const count = document.createRange();
    count.selectNodeContents(cell.firstChild!);
    const text = count.getBoundingClientRect();
    return {
      height: frame.height,
      tallest: Math.max(0, ...marks.map((mark) => mark.height)),
      baselineWidth: baseline?.getBoundingClientRect().width ?? 0,
      baselineColour: baseline ? getComputedStyle(baseline).stroke : "",
      markColour: svg.querySelector(":scope > :not(.baseline)")
        ? getComputedStyle(svg.querySelector(":scope > :not(.baseline)")!).fill
        : "",
      cell: cell.dataset.label,
      sameLine: frame.top < text.bottom && frame.bottom > text.top,
    };
  });
  // Three receipts in the latest hour and none before: not flat, so the marks stand well above the baseline.
  if (spark.tallest < spark.height / 2) problems.push(`sparkline marks ${spark.tallest} px of ${spark.height}`);
  if (spark.baselineWidth < spark.height * 3) problems.push("the sparkline has no baseline across its width");
  if (spark.baselineColour === spark.markColour) problems.push("the sparkline's baseline looks like its data");
  if (spark.cell !== "Received") problems.push(`the sparkline is in the ${spark.cell} cell, not by its count`);
  if (!spark.sameLine) problems.push("the sparkline is not on its count's line");
  assert.deepEqual(problems, []);
  await shoot(page, "overview-spark");
  await page.close();
});

test("the receipts table filters, and a receipt shows its attempt timeline and body", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/receipts`);
  assert.equal(await page.locator("#receipts tbody tr").count(), 3);
  await page.selectOption('select[name="status"]', "processed");
  await page.click(".filters button[type=submit]");
  await page.waitForURL(/status=processed/);
  const statuses = await page.locator("#receipts tbody .badge").allTextContents();
  assert.deepEqual(statuses, ["processed", "processed"]);

  await page.fill('input[name="eventKey"]', events.plan);
  await page.click(".filters button[type=submit]");
  await page.waitForURL(/eventKey=/);
  assert.equal(await page.locator("#receipts tbody tr").count(), 1);
  await page.locator(`#receipts tr[data-receipt="${receipts.plan}"] a`).click();
  await page.waitForURL(`${BASE}/admin/receipts/${receipts.plan}`);
  assert.match(
    (await page.locator("#timeline").textContent()) ?? "",
    /Received.*Relayed to D1 and enqueued.*Attempt 1: processed.*Finished: processed/s,
  );
  assert.match((await page.locator("#body").textContent()) ?? "", /"plan":"plan_v7"/);
  await page.close();
});

test("a dead letter is replayed from the dashboard and its timeline shows the second run", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/dead`);
  const row = page.locator(`#receipts tr[data-receipt="${receipts.broken}"]`);
  assert.match((await row.textContent()) ?? "", /data\.amount must be an integer/);
  await row.locator('input[type="checkbox"]').check();
  await page.click("#replay-selected");
  await page.waitForURL(`${BASE}/admin/dead`);
  assert.equal((await page.textContent(".flash"))?.trim(), "1 receipt replayed.");
  await page.reload();
  assert.equal(await page.locator(".flash").count(), 0, "the message does not come back on reload");

  // The payload is still wrong, so the replay dies again — after a second, recorded attempt.
  await waitForStatus(receipts.broken, ["dead"], 2);
  await page.goto(`${BASE}/admin/receipts/${receipts.broken}`);
  const timeline = (await page.locator("#timeline").textContent()) ?? "";
  assert.match(timeline, /Received.*Attempt 1: dead.*Replayed: enqueued again.*Attempt 2: dead/s);
  await shoot(page, "receipt");

  await page.click("#replay");
  await page.waitForURL(`${BASE}/admin/receipts/${receipts.broken}`);
  assert.match((await page.textContent(".flash")) ?? "", /Replayed/);
  // Pending again, so there is nothing to do: the Actions heading says so rather than standing over nothing.
  const underActions = await page.locator("h2", { hasText: "Actions" }).evaluate((heading) => {
    const next = heading.nextElementSibling;
    return next && !/^H\d$/.test(next.tagName) ? next.getBoundingClientRect().height : 0;
  });
  assert.ok(underActions > 0, "the Actions heading is empty");
  await page.close();
});

test("a fixed incident stops showing red: dismissing the dead letter clears that reason, restoring brings it back", async () => {
  await waitForStatus(receipts.broken, ["dead"], 3);
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/receipts/${receipts.broken}`);
  await page.click("#dismiss");
  await page.waitForURL(`${BASE}/admin/receipts/${receipts.broken}`);
  assert.match((await page.textContent(".flash")) ?? "", /1 dead letter dismissed/);
  assert.match((await page.locator("#timeline").textContent()) ?? "", /Replay 2 of 2.*Dismissed by an operator/s);
  await page.goto(`${BASE}/admin/sources/demo`);
  // Still failing, but only because of the open alert.
  assert.deepEqual(
    await page
      .locator("#health-reasons li")
      .evaluateAll((items) => items.map((item) => item.getAttribute("data-reason"))),
    ["open-alerts"],
  );
  await page.goto(`${BASE}/admin/dead?show=dismissed`);
  await page.locator(`#receipts tr[data-receipt="${receipts.broken}"] input[type="checkbox"]`).check();
  await page.click("#restore-selected");
  await page.waitForURL(`${BASE}/admin/dead?show=dismissed`);
  assert.match((await page.textContent(".flash")) ?? "", /1 receipt restored/);
  await page.goto(`${BASE}/admin/dead`);
  assert.equal(await page.locator(`#receipts tr[data-receipt="${receipts.broken}"]`).count(), 1);
  await shoot(page, "dead");
  await page.close();
});

test("the audit log lists the dashboard's replays, dismissal and restore, its outcomes as coloured badges", async () => {
  // A refusal, as a viewer signed in through Access would leave one (test/admin/access-roles.test.ts makes them).
  d1Execute(
    `INSERT INTO operator_actions (id, at, actor, role, via, action, target, affected, outcome) VALUES ('01KBR0WSERREFVSED000000001', ${Date.now()}, 'viewer@example.com', 'viewer', 'dashboard', 'replay', '/admin/dead/action', 0, 'refused')`,
  );
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin`);
  await page.click('header nav a[href="/admin/audit-log"]');
  await page.waitForURL(`${BASE}/admin/audit-log`);
  const rows = await page.locator("#audit-log tbody tr").evaluateAll((trs) =>
    trs.map((tr) => {
      const cell = (label: string) => tr.querySelector(`td[data-label="${label}"]`)?.textContent?.trim();
      return `${cell("Actor")} ${cell("Via")} ${cell("Action")} ${cell("Affected")} ${cell("Outcome")}`;
    }),
  );
  // Newest first: the restore, the dismissal and the two replays done above; and the refusal written here.
  assert.deepEqual(
    rows.filter((row) => row.startsWith("admin-token")),
    [
      "admin-token dashboard restore 1 allowed",
      "admin-token dashboard dismiss 1 allowed",
      "admin-token dashboard replay 1 allowed",
      "admin-token dashboard replay 1 allowed",
    ],
  );
  assert.ok(rows.includes("viewer@example.com dashboard replay 0 refused"), rows.join("\n"));
  const colours = async (outcome: string) =>
    page
      .locator(`#audit-log tr[data-outcome="${outcome}"] .badge`)
      .first()
      .evaluate((badge) => {
        const style = getComputedStyle(badge);
        return { background: style.backgroundColor, colour: style.color, radius: style.borderRadius };
      });
  assert.deepEqual(await colours("allowed"), {
    background: "rgb(220, 243, 230)",
    colour: "rgb(31, 122, 77)",
    radius: "10px",
  });
  assert.deepEqual(await colours("refused"), {
    background: "rgb(253, 226, 223)",
    colour: "rgb(180, 35, 24)",
    radius: "10px",
  });

  await page.selectOption('select[name="outcome"]', "refused");
  await page.click(".filters button[type=submit]");
  await page.waitForURL(/outcome=refused/);
  assert.equal(await page.locator("#audit-log tbody tr").count(), 1);
  await shoot(page, "audit-log");
  await page.close();
});

test("a filter the server cannot read keeps the form and what was typed", async () => {
  const page = await context!.newPage();
  const response = await page.goto(`${BASE}/admin/receipts?source=demo&since=last-tuesday`);
  assert.equal(response?.status(), 400);
  assert.match((await page.textContent("#filter-problem")) ?? "", /"since"/);
  assert.equal(await page.inputValue('input[name="since"]'), "last-tuesday");
  await page.fill('input[name="since"]', "");
  await page.click(".filters button[type=submit]");
  await page.waitForURL(/source=demo/);
  assert.equal(await page.locator("#receipts tbody tr").count(), 3);
  await page.close();
});

test("alerts read as sentences, linked to what they concern", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/alerts`);
  const row = page.locator('#alerts tr[data-alert="01KBROWSERALERT00000000001"]');
  assert.equal(
    (await row.locator(".alert-message").textContent())?.trim(),
    "The demo source has had no live delivery for 1 h.",
  );
  assert.equal(await row.locator('td[data-label="Concerns"] a').getAttribute("href"), "/admin/sources/demo");
  await shoot(page, "alerts");
  await page.close();
});

test("issues: the dead letter's issue shows in its colours, and is acknowledged with a note from a plain form", async () => {
  const issueKey = "dead-letters:demo:default";
  const deadline = Date.now() + WAIT.pipeline;
  for (;;) {
    assert.equal((await fetch(`${BASE}/__scheduled?cron=*/5+*+*+*+*`)).status, 200);
    const { issues } = await adminApi<{ issues: { issueKey: string }[] }>("/issues");
    if (issues.some((issue) => issue.issueKey === issueKey)) break;
    if (Date.now() > deadline) throw new Error(`no issue ${issueKey} after the cron:\n${workerLog.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/issues`);
  const row = page.locator(`#issues tr[data-issue="${issueKey}"]`);
  assert.match((await row.locator(".issue-message").textContent()) ?? "", /^1 dead delivery on route default/);
  const colours = (selector: string) =>
    row.locator(selector).evaluate((badge) => {
      const style = getComputedStyle(badge);
      return { text: badge.textContent, background: style.backgroundColor, color: style.color };
    });
  assert.deepEqual(await colours('td[data-label="Severity"] .badge'), {
    text: "warning",
    background: "rgb(253, 240, 213)",
    color: "rgb(154, 100, 0)",
  });
  assert.deepEqual(await colours('td[data-label="State"] .badge'), {
    text: "open",
    background: "rgb(253, 226, 223)",
    color: "rgb(180, 35, 24)",
  });
  // The note field and its button share one line in the row's cell, the field taking the room left.
  const form = await row
    .locator("form.issue-action")
    .first()
    .evaluate((element) => {
      const input = element.querySelector("input")!.getBoundingClientRect();
      const button = element.querySelector("button")!.getBoundingClientRect();
      return { display: getComputedStyle(element).display, sameLine: Math.abs(input.top - button.top) < 4 };
    });
  assert.deepEqual(form, { display: "flex", sameLine: true });
  await shoot(page, "issues");

  await row.locator('input[name="note"]').fill("replaying once the ledger is fixed");
  await row.locator('button:has-text("Acknowledge")').click();
  await page.waitForURL(`${BASE}/admin/issues`);
  assert.equal((await page.textContent(".flash"))?.trim(), `Issue ${issueKey} acknowledged.`);
  assert.equal((await row.locator(".issue-note").textContent())?.trim(), "Note: replaying once the ledger is fixed");
  assert.deepEqual(await colours('td[data-label="State"] .badge'), {
    text: "acknowledged",
    background: "rgb(253, 240, 213)",
    color: "rgb(154, 100, 0)",
  });
  assert.equal(await row.locator('input[name="note"]').count(), 0, "an acknowledged issue has no acknowledge form");
  await page.close();
});

test("at 390 px the navigation stays on one line and nothing is wider than the screen", async () => {
  const page = await context!.newPage();
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [name, path] of [
    ["phone-overview", "/admin"],
    ["phone-source", "/admin/sources/demo"],
    ["phone-receipts", "/admin/receipts"],
    ["phone-receipt", `/admin/receipts/${receipts.broken}`],
    ["phone-dead", "/admin/dead"],
    ["phone-alerts", "/admin/alerts"],
    ["phone-audit-log", "/admin/audit-log"],
    ["phone-issues", "/admin/issues"],
  ] as const) {
    await page.goto(`${BASE}${path}`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `${path} is ${width} px wide at 390 px`);
    const rows = await page
      .locator("header nav a")
      .evaluateAll((links) => new Set(links.map((link) => (link as HTMLElement).offsetTop)).size);
    assert.equal(rows, 1, `${path}: the navigation wraps`);
    // The line is cut at the screen's edge: a light edge on the right says more sections lie past it, and the
    // cover that scrolls with the links hides it once the last one ("Audit log") is in view.
    const nav = await page.locator("header nav").evaluate((element) => ({
      overflows: element.scrollWidth > element.clientWidth,
      attachments: getComputedStyle(element).backgroundAttachment,
      images: getComputedStyle(element).backgroundImage,
    }));
    assert.ok(nav.overflows, `${path}: the navigation fits, so this check says nothing`);
    assert.equal(nav.attachments, "local, scroll", `${path}: no scroll cue on the navigation`);
    assert.match(nav.images, /linear-gradient.*linear-gradient/, path);
    const last = await page
      .locator("header nav a")
      .last()
      .evaluate((link) => {
        const nav = link.parentElement!;
        nav.scrollLeft = nav.scrollWidth;
        const box = link.getBoundingClientRect();
        return box.right <= nav.getBoundingClientRect().right + 1;
      });
    assert.ok(last, `${path}: the last section cannot be scrolled fully into view`);
    await shoot(page, name);
  }
  await page.close();
});

test("the stylesheet applies as written: body font, unstretched badges on a phone, timeline dots", async () => {
  // Screenshots did not catch an HTML-escaped stylesheet: read what the browser computed instead.
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/receipts/${receipts.broken}`);
  const body = await page.evaluate(() => {
    const style = getComputedStyle(document.body);
    return { fontFamily: style.fontFamily, fontSize: style.fontSize };
  });
  assert.match(body.fontFamily, /^system-ui, -apple-system, "Segoe UI", sans-serif$/);
  assert.equal(body.fontSize, "14px");
  const dot = await page
    .locator("ol.timeline li")
    .first()
    .evaluate((item) => {
      const marker = getComputedStyle(item, "::before");
      return { content: marker.content, width: marker.width, radius: marker.borderRadius };
    });
  assert.deepEqual(dot, { content: '""', width: "12px", radius: "50%" });

  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${BASE}/admin/receipts`);
  const badges = await page.locator("table.rows td > .badge").evaluateAll((elements) =>
    elements.map((badge) => ({
      badge: badge.getBoundingClientRect().width,
      cell: badge.parentElement!.getBoundingClientRect().width,
    })),
  );
  assert.ok(badges.length > 0, "the receipts table shows status badges");
  for (const { badge, cell } of badges)
    assert.ok(badge < cell / 2, `a badge ${badge} px wide stretches across its ${cell} px cell`);
  await page.close();
});

test("the source page's Verification section: secrets by name, advice badges coloured as written, cards on a phone", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/sources/demo`);
  const section = page.locator("#verification");
  // The demo lists one secret: named, never shown by value, and with nothing to tell apart.
  assert.equal((await section.locator('td[data-label="Secret"]').textContent())?.trim(), "DEMO_WEBHOOK_SECRET");
  assert.ok(
    !((await section.textContent()) ?? "").includes(DEMO_SECRET.slice("whsec_".length)),
    "a secret's value shown",
  );
  const badge = await section.locator(".badge").evaluate((element) => {
    const style = getComputedStyle(element);
    return { text: element.textContent, display: style.display, radius: style.borderRadius, weight: style.fontWeight };
  });
  assert.deepEqual(badge, { text: "only secret", display: "inline-block", radius: "10px", weight: "600" });
  // Each advice a rotation can get, as its badge and warning line would be drawn: read what the browser computed.
  const advice = await section.evaluate((element) => {
    const colours: Record<string, { badge: string; border: string }> = {};
    for (const kind of ["still-verifying", "not-seen-yet", "safe-to-remove", "current"]) {
      const badgeProbe = document.createElement("span");
      badgeProbe.className = `badge ${kind}`;
      const list = document.createElement("ul");
      list.className = "reasons";
      const line = document.createElement("li");
      line.className = kind;
      list.append(line);
      element.append(badgeProbe, list);
      colours[kind] = { badge: getComputedStyle(badgeProbe).color, border: getComputedStyle(line).borderLeftColor };
      badgeProbe.remove();
      list.remove();
    }
    return colours;
  });
  assert.deepEqual(advice, {
    "still-verifying": { badge: "rgb(154, 100, 0)", border: "rgb(154, 100, 0)" },
    "not-seen-yet": { badge: "rgb(154, 100, 0)", border: "rgb(154, 100, 0)" },
    "safe-to-remove": { badge: "rgb(31, 122, 77)", border: "rgb(31, 122, 77)" },
    current: { badge: "rgb(91, 100, 117)", border: "rgb(154, 100, 0)" },
  });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  const cell = await section.locator('td[data-label="Secret"]').evaluate((element) => ({
    display: getComputedStyle(element).display,
    row: getComputedStyle(element.parentElement!).display,
  }));
  assert.deepEqual(cell, { display: "grid", row: "block" }, "the secrets table turns into cards on a phone");
  await shoot(page, "phone-source-verification");
  await page.close();
});

test("the audit recipes run through wrangler d1 execute, verbatim from docs/audit.md", () => {
  const doc = readFileSync("docs/audit.md", "utf8");
  const deadSince = /<!-- recipe: dead-since -->\s*```sql\n([\s\S]*?)```/.exec(doc)?.[1]?.trim();
  assert.ok(deadSince);
  const output = d1Execute(deadSince, { json: true });
  const [{ results }] = JSON.parse(output) as [{ results: { event_key: string }[] }];
  assert.ok(
    results.some((row) => row.event_key === events.broken),
    "the dead demo event is listed",
  );
});

test("signing out ends the session, and the token never appeared in a URL", async () => {
  const page = await context!.newPage();
  await page.goto(`${BASE}/admin/alerts`);
  await page.click("header form button");
  await page.waitForURL(`${BASE}/admin/login`);
  await page.goto(`${BASE}/admin/dead`);
  assert.equal(new URL(page.url()).pathname, "/admin/login");
  await shoot(page, "login");
  assert.ok(requestedUrls.length > 10);
  assert.ok(requestedUrls.every((url) => !url.includes(ADMIN_TOKEN)));
  await page.close();
});
