import {
  type Issue,
  type IssueCondition,
  type IssueHistoryEntry,
  type IssueKind,
  type IssueSeverity,
  issueKey,
  type NoticeEvent,
  type PlannedNotice,
} from "./types";

/**
 * The issue lifecycle as pure functions: previous issues + the conditions firing now + the time → the issues that
 * changed, their history entries and the notices to send. The system monitor stores what these return.
 *
 * Notices: an issue announces its opening, each rise in severity and its resolution. At most one opening or
 * escalation notice per issue per `noticeIntervalMs` (a flapping condition reopens the same issue, so it cannot
 * storm the channels): a notice held by the limit goes out at the first evaluation after the interval if the issue
 * is still open. A resolution (and an operator's acknowledgement) is announced only when something was announced in
 * that episode, and is never held.
 */

export interface IssuePolicy {
  noticeIntervalMs: number;
}

export const DEFAULT_ISSUE_POLICY: IssuePolicy = { noticeIntervalMs: 15 * 60_000 };

export interface IssuePlan {
  changed: Issue[];
  history: IssueHistoryEntry[];
  notices: PlannedNotice[];
}

const RANK: Record<IssueSeverity, number> = { warning: 1, critical: 2 };

/**
 * `observed` names the kinds whose conditions were all read this time: an issue of such a kind with no firing
 * condition has cleared and resolves; an issue of a kind not observed (its read failed, or it is another caller's)
 * is left as it is. `resolutions` says, per issue key, why one that resolves now is over (a route's recovery names
 * what it re-drove): its last message and history line; otherwise "the condition cleared".
 */
export function planIssues(
  previous: readonly Issue[],
  firing: readonly IssueCondition[],
  observed: ReadonlySet<IssueKind>,
  now: number,
  policy: IssuePolicy = DEFAULT_ISSUE_POLICY,
  resolutions: ReadonlyMap<string, string> = new Map(),
): IssuePlan {
  const plan: IssuePlan = { changed: [], history: [], notices: [] };
  const byKey = new Map(previous.map((issue) => [issue.issueKey, issue]));
  const current = mostSevereByKey(firing);
  const touched = new Map<string, Issue>();
  /** Opened, reopened or escalated by this evaluation: a notice the rate limit holds is worth a history line. */
  const transitioned = new Set<string>();
  const note = (issue: Issue, event: IssueHistoryEntry["event"], detail: string) =>
    plan.history.push({ issueKey: issue.issueKey, at: now, event, detail });

  for (const [key, condition] of current) {
    const known = byKey.get(key);
    if (known === undefined || known.state === "resolved") {
      const issue = openIssue(key, condition, known, now);
      note(issue, known ? "reopened" : "opened", condition.message);
      touched.set(key, issue);
      transitioned.add(key);
      continue;
    }
    if (known.message === condition.message && known.severity === condition.severity) continue;
    const escalated = RANK[condition.severity] > RANK[known.severity];
    const issue: Issue = {
      ...known,
      severity: condition.severity,
      message: condition.message,
      updatedAt: now,
      // A rise in severity is news the acknowledgement did not cover.
      ...(escalated ? { state: "open", acknowledgedAt: null, acknowledgeNote: null } : {}),
    };
    if (escalated) {
      note(issue, "escalated", condition.message);
      transitioned.add(key);
    }
    touched.set(key, issue);
  }

  for (const known of previous) {
    if (known.state === "resolved" || current.has(known.issueKey) || !observed.has(known.kind)) continue;
    const why = resolutions.get(known.issueKey);
    const issue = { ...resolve(known, "receiver", now), ...(why === undefined ? {} : { message: why }) };
    note(issue, "resolved", why ?? "the condition cleared");
    touched.set(known.issueKey, withResolveNotice(issue, known, plan, now));
  }

  // Openings and escalations to announce, including ones the rate limit held at an earlier evaluation.
  for (const issue of [...previous.filter((known) => !touched.has(known.issueKey)), ...touched.values()]) {
    if (issue.state === "resolved") continue;
    const due = dueNotice(issue);
    if (due === null) continue;
    if (issue.lastNoticeAt !== null && now - issue.lastNoticeAt < policy.noticeIntervalMs) {
      if (transitioned.has(issue.issueKey)) note(issue, "notice-held", `${due} notice held by the rate limit`);
      continue;
    }
    plan.notices.push({ issueKey: issue.issueKey, event: due });
    touched.set(issue.issueKey, { ...issue, notifiedSeverity: issue.severity, lastNoticeAt: now });
  }
  plan.changed = [...touched.values()];
  return plan;
}

/** An operator acknowledges an open issue, with a note; announced when its opening was. */
export function acknowledgeIssue(
  issue: Issue,
  acknowledgeNote: string,
  now: number,
): { ok: true; plan: IssuePlan } | { ok: false; reason: string } {
  if (issue.state !== "open") return { ok: false, reason: `issue ${issue.issueKey} is ${issue.state}, not open` };
  const acknowledged: Issue = { ...issue, state: "acknowledged", acknowledgedAt: now, acknowledgeNote, updatedAt: now };
  return {
    ok: true,
    plan: {
      changed: [acknowledged],
      history: [{ issueKey: issue.issueKey, at: now, event: "acknowledged", detail: acknowledgeNote }],
      notices: issue.notifiedSeverity !== null ? [{ issueKey: issue.issueKey, event: "acknowledged" }] : [],
    },
  };
}

/**
 * An operator resolves an issue by hand (open or acknowledged). If its condition still holds, the next evaluation
 * opens it again: resolving by hand is for what the receiver cannot see clear.
 */
export function resolveIssueByHand(
  issue: Issue,
  now: number,
  detail = "resolved by an operator",
): { ok: true; plan: IssuePlan } | { ok: false; reason: string } {
  if (issue.state === "resolved") return { ok: false, reason: `issue ${issue.issueKey} is already resolved` };
  const plan: IssuePlan = { changed: [], history: [], notices: [] };
  const resolved = resolve(issue, "operator", now);
  plan.history.push({ issueKey: issue.issueKey, at: now, event: "resolved", detail });
  plan.changed.push(withResolveNotice(resolved, issue, plan, now));
  return { ok: true, plan };
}

function dueNotice(issue: Issue): NoticeEvent | null {
  if (issue.notifiedSeverity === null) return "opened";
  return RANK[issue.severity] > RANK[issue.notifiedSeverity] ? "escalated" : null;
}

function withResolveNotice(resolved: Issue, before: Issue, plan: IssuePlan, now: number): Issue {
  if (before.notifiedSeverity === null) return resolved;
  plan.notices.push({ issueKey: resolved.issueKey, event: "resolved" });
  return { ...resolved, notifiedSeverity: null, lastNoticeAt: now };
}

function resolve(issue: Issue, by: "receiver" | "operator", now: number): Issue {
  return { ...issue, state: "resolved", resolvedAt: now, resolvedBy: by, updatedAt: now };
}

function openIssue(key: string, condition: IssueCondition, known: Issue | undefined, now: number): Issue {
  return {
    issueKey: key,
    kind: condition.kind,
    source: condition.source,
    route: condition.route,
    store: condition.store,
    state: "open",
    severity: condition.severity,
    message: condition.message,
    openedAt: now,
    updatedAt: now,
    acknowledgedAt: null,
    acknowledgeNote: null,
    resolvedAt: null,
    resolvedBy: null,
    episodes: (known?.episodes ?? 0) + 1,
    notifiedSeverity: null,
    lastNoticeAt: known?.lastNoticeAt ?? null,
  };
}

/** Two conditions for one issue (a store both near and at its limit): the more severe speaks for it. */
function mostSevereByKey(firing: readonly IssueCondition[]): Map<string, IssueCondition> {
  const byKey = new Map<string, IssueCondition>();
  for (const condition of firing) {
    const key = issueKey(condition.kind, condition);
    const seen = byKey.get(key);
    if (seen === undefined || RANK[condition.severity] > RANK[seen.severity]) byKey.set(key, condition);
  }
  return byKey;
}
