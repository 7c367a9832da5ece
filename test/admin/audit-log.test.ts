import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { database } from "../../src/db/client";
import { operatorActions } from "../../src/db/schema";
import { ulid } from "../../src/lib/ulid";
import { operatorActionsRetentionMs } from "../../src/reconcile/operator-actions-retention";
import { CRON_TEST_TIMEOUT_MS, runCron } from "../reconcile/support";
import { adminGet, adminPost, dashboardPage, dashboardSession, seedReceipt, uniqueSource } from "./support";

/**
 * The operator audit log through the real routes: each operator action through the API and the dashboard writes one
 * row (who, what, on what, how many it affected), GET /admin/api/audit-log pages through them newest first, the
 * dashboard lists them, and the cron forgets rows past OPERATOR_ACTIONS_RETENTION (90 days by default).
 * Refusals for a role are in test/admin/access-roles.test.ts.
 */

interface Row {
  actionId: string;
  actor: string;
  role: string;
  via: string;
  action: string;
  target: string;
  affected: number;
  outcome: string;
}
interface Page {
  actions: Row[];
  nextCursor: string | null;
}

const auditLog = async (query: string): Promise<Page> => {
  const response = await adminGet(`/admin/api/audit-log${query}`);
  expect(response.status).toBe(200);
  return (await response.json()) as Page;
};

const summary = ({ actor, role, via, action, target, affected, outcome }: Row) => ({
  actor,
  role,
  via,
  action,
  target,
  affected,
  outcome,
});

describe("the operator audit log", () => {
  it("records dismiss, restore, pause and resume through the API, with how many each affected", async () => {
    const source = uniqueSource("audit");
    const dead = await Promise.all(
      [1, 2, 3].map(() => seedReceipt({ source, receivedAt: Date.now(), status: "dead" })),
    );
    expect((await adminPost("/admin/api/dead/dismiss", { receiptIds: dead })).status).toBe(200);
    expect((await adminPost("/admin/api/dead/restore", { receiptIds: [dead[0]] })).status).toBe(200);
    expect((await adminPost("/admin/api/sources/audit-log-gated/routes/ledger/pause", {})).status).toBe(200);
    expect((await adminPost("/admin/api/sources/audit-log-gated/routes/ledger/resume", {})).status).toBe(200);

    const page = await auditLog("?actor=admin-token&limit=4");
    const admin = { actor: "admin-token", role: "admin", via: "api", outcome: "allowed" };
    expect(page.actions.map(summary)).toEqual([
      { ...admin, action: "resume", target: "source audit-log-gated, route ledger", affected: 0 },
      { ...admin, action: "pause", target: "source audit-log-gated, route ledger", affected: 1 },
      { ...admin, action: "restore", target: `receipt ${dead[0]}`, affected: 1 },
      { ...admin, action: "dismiss", target: "3 receipts", affected: 3 },
    ]);
  });

  it("pages newest first with nextCursor, filters by action and outcome, and refuses a bad query 400", async () => {
    const source = uniqueSource("audit-paging");
    for (let round = 0; round < 3; round += 1) {
      const receiptId = await seedReceipt({ source, receivedAt: Date.now(), status: "dead" });
      expect((await adminPost("/admin/api/dead/dismiss", { receiptIds: [receiptId] })).status).toBe(200);
    }
    const first = await auditLog("?action=dismiss&limit=2");
    expect(first.actions).toHaveLength(2);
    expect(first.nextCursor).toBe(first.actions[1]!.actionId);
    const second = await auditLog(`?action=dismiss&limit=2&before=${first.nextCursor}`);
    expect(second.actions.length).toBeGreaterThan(0);
    const ids = [...first.actions, ...second.actions].map((row) => row.actionId);
    expect(ids).toEqual([...ids].sort().reverse());
    expect(new Set(ids).size).toBe(ids.length);
    expect((await auditLog("?outcome=refused&actor=admin-token")).actions).toEqual([]);

    for (const bad of ["?action=delete", "?outcome=maybe", "?before=yesterday", "?limit=0", "?who=me"]) {
      const response = await adminGet(`/admin/api/audit-log${bad}`);
      expect(response.status, bad).toBe(400);
    }
  });

  it("records a dashboard replay as the dashboard's, and lists it on the audit log page", async () => {
    const cookie = await dashboardSession();
    const receiptId = await seedReceipt({ source: uniqueSource("audit-dash"), receivedAt: Date.now(), status: "dead" });
    const replay = await dashboardPage(`/admin/receipts/${receiptId}/replay`, {
      method: "POST",
      headers: { cookie, origin: "https://receiver.test" },
    });
    expect(replay.status).toBe(303);
    const [row] = (await auditLog(`?actor=admin-token&action=replay&limit=1`)).actions;
    // Seeded without a body: nothing to replay, so nothing affected, and still recorded.
    expect(summary(row!)).toMatchObject({
      via: "dashboard",
      action: "replay",
      target: `receipt ${receiptId}`,
      affected: 0,
    });

    const page = await dashboardPage("/admin/audit-log?action=replay", { headers: { cookie } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(`receipt ${receiptId}`);
    expect(html).toContain('<span class="badge allowed">allowed</span>');
    expect((await dashboardPage("/admin/audit-log?outcome=maybe", { headers: { cookie } })).status).toBe(400);
  });

  it(
    "is kept for OPERATOR_ACTIONS_RETENTION, 90 days by default: the cron deletes older rows only",
    async () => {
      const now = Date.now();
      const day = 86_400_000;
      const actor = `retention-${crypto.randomUUID()}`;
      const row = (at: number) => ({
        actionId: ulid(at),
        at,
        actor,
        role: "admin",
        via: "api",
        action: "dismiss",
        target: "1 receipt",
        affected: 1,
        outcome: "allowed" as const,
      });
      const [old, recent] = [row(now - 91 * day), row(now - 89 * day)];
      await database(env).insert(operatorActions).values([old, recent]);
      await runCron(now);
      const kept = await auditLog(`?actor=${actor}`);
      expect(kept.actions.map((action) => action.actionId)).toEqual([recent.actionId]);
    },
    CRON_TEST_TIMEOUT_MS,
  );

  it("reads its retention setting strictly: a bad one deletes nothing and says why", () => {
    expect(operatorActionsRetentionMs({})).toBe(90 * 86_400_000);
    expect(operatorActionsRetentionMs({ OPERATOR_ACTIONS_RETENTION: "30d" })).toBe(30 * 86_400_000);
    for (const bad of ["forever", "0d", "-5d"])
      expect(() => operatorActionsRetentionMs({ OPERATOR_ACTIONS_RETENTION: bad })).toThrow(
        /OPERATOR_ACTIONS_RETENTION/,
      );
  });
});
