import { describe, expect, it } from "vitest";
import { acknowledgeIssue, planIssues, resolveIssueByHand } from "../../src/monitor/issues/plan";
import type { Issue, IssueCondition, IssueKind } from "../../src/monitor/issues/types";

/** The issue lifecycle's decisions (src/monitor/issues/plan.ts), one evaluation at a time. */

const MINUTE = 60_000;
const ALL: ReadonlySet<IssueKind> = new Set(["store-near-limit", "breaker-open", "dead-letters"]);

const store = (severity: "warning" | "critical", message = `store ${severity}`): IssueCondition => ({
  kind: "store-near-limit",
  source: null,
  route: null,
  store: "database:DB",
  severity,
  message,
});

/** Runs evaluations in order, each from the issues the previous left; answers each one's plan. */
function run(steps: { at: number; firing: IssueCondition[]; observed?: ReadonlySet<IssueKind> }[]) {
  let issues: Issue[] = [];
  return steps.map((step) => {
    const plan = planIssues(issues, step.firing, step.observed ?? ALL, step.at);
    const changed = new Map(plan.changed.map((issue) => [issue.issueKey, issue]));
    issues = [...issues.filter((issue) => !changed.has(issue.issueKey)), ...changed.values()];
    return { plan, issues };
  });
}

describe("planIssues", () => {
  it("opens one issue per key however often the condition is seen, and updates its message without a notice", () => {
    const [first, second, third] = run([
      { at: 0, firing: [store("warning"), store("warning")] },
      { at: MINUTE, firing: [store("warning")] },
      { at: 2 * MINUTE, firing: [store("warning", "store warning, fuller")] },
    ]);
    expect(first!.plan.notices).toEqual([{ issueKey: "store-near-limit:database:DB", event: "opened" }]);
    expect(first!.issues).toHaveLength(1);
    expect(second!.plan).toEqual({ changed: [], history: [], notices: [] });
    expect(third!.plan.notices).toEqual([]);
    expect(third!.issues[0]).toMatchObject({ message: "store warning, fuller", updatedAt: 2 * MINUTE, openedAt: 0 });
  });

  it("escalates on a rise in severity, reopening an acknowledged issue, and announces it", () => {
    const [opened] = run([{ at: 0, firing: [store("warning")] }]);
    const acknowledged = acknowledgeIssue(opened!.issues[0]!, "cleaning up", MINUTE);
    if (!acknowledged.ok) throw new Error(acknowledged.reason);
    expect(acknowledged.plan.notices).toEqual([{ issueKey: "store-near-limit:database:DB", event: "acknowledged" }]);
    const escalated = planIssues(acknowledged.plan.changed, [store("critical")], ALL, 20 * MINUTE);
    expect(escalated.notices).toEqual([{ issueKey: "store-near-limit:database:DB", event: "escalated" }]);
    expect(escalated.changed[0]).toMatchObject({ state: "open", severity: "critical", acknowledgeNote: null });
    expect(escalated.history.map((entry) => entry.event)).toEqual(["escalated"]);
  });

  it("holds an escalation inside the interval and sends it at the first evaluation after", () => {
    const steps = run([
      { at: 0, firing: [store("warning")] },
      { at: 5 * MINUTE, firing: [store("critical")] },
      { at: 10 * MINUTE, firing: [store("critical")] },
      { at: 15 * MINUTE, firing: [store("critical")] },
    ]);
    expect(steps.map((step) => step.plan.notices.map((notice) => notice.event))).toEqual([
      ["opened"],
      [],
      [],
      ["escalated"],
    ]);
    expect(steps[1]!.plan.history.map((entry) => entry.event)).toEqual(["escalated", "notice-held"]);
    expect(steps[2]!.plan.history).toEqual([]);
  });

  it("resolves an issue of an observed kind that no longer fires, and leaves one of a kind not read this time", () => {
    const steps = run([
      { at: 0, firing: [store("warning")] },
      { at: MINUTE, firing: [], observed: new Set(["dead-letters"]) },
      { at: 2 * MINUTE, firing: [] },
    ]);
    expect(steps[1]!.plan.changed).toEqual([]);
    expect(steps[2]!.plan.notices).toEqual([{ issueKey: "store-near-limit:database:DB", event: "resolved" }]);
    expect(steps[2]!.issues[0]).toMatchObject({ state: "resolved", resolvedBy: "receiver", notifiedSeverity: null });
  });

  it("a flapping condition reopens the same issue and sends no more than one opening per interval, and its resolve only when announced", () => {
    const flapping = [0, 1, 2, 3, 4, 5, 6, 7].map((minute) => ({
      at: minute * MINUTE,
      firing: minute % 2 === 0 ? [store("warning")] : [],
    }));
    const steps = run(flapping);
    expect(steps.flatMap((step) => step.plan.notices.map((notice) => notice.event))).toEqual(["opened", "resolved"]);
    expect(steps.at(-1)!.issues).toHaveLength(1);
    expect(steps.at(-1)!.issues[0]).toMatchObject({ episodes: 4 });
  });

  it("an operator's resolve is announced when the opening was; a second one is refused, as is acknowledging a resolved issue", () => {
    const [opened] = run([{ at: 0, firing: [store("warning")] }]);
    const resolved = resolveIssueByHand(opened!.issues[0]!, MINUTE, "moved the data");
    if (!resolved.ok) throw new Error(resolved.reason);
    expect(resolved.plan.notices).toEqual([{ issueKey: "store-near-limit:database:DB", event: "resolved" }]);
    expect(resolved.plan.changed[0]).toMatchObject({ state: "resolved", resolvedBy: "operator" });
    expect(resolveIssueByHand(resolved.plan.changed[0]!, 2 * MINUTE)).toMatchObject({ ok: false });
    expect(acknowledgeIssue(resolved.plan.changed[0]!, "late", 2 * MINUTE)).toMatchObject({ ok: false });
  });
});
