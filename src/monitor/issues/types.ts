/**
 * Issues: what an operator has to look at, opened, kept up to date and resolved by the receiver itself from the
 * conditions it already watches (src/monitor/conditions.ts, the cron's watch). One issue per (kind, source, route)
 * — or per store for a store near its limit — however often the condition is seen. docs/operating.md "Issues and
 * notices" describes them for operators.
 */

export type IssueKind =
  /** A route's circuit breaker is open: its deliveries are held. */
  | "breaker-open"
  /** A route without a circuit breaker has deliveries failing and waiting for a retry, past a threshold. */
  | "destination-failing"
  /** A route has dead deliveries waiting for an operator (its own and every further route's). */
  | "dead-letters"
  /** A source's deliveries failed their signature check far more than usual: a rotated secret nobody updated. */
  | "signature-failures"
  /** No live delivery for longer than the source's expect_within. */
  | "silence"
  /** The oldest unfinished delivery of a source waited longer than its alert_pending_after. */
  | "backlog-age"
  /** A receipt database or claim shard is near (warning) or at (critical) its size limit. */
  | "store-near-limit";

export const ISSUE_KINDS: readonly IssueKind[] = [
  "breaker-open",
  "destination-failing",
  "dead-letters",
  "signature-failures",
  "silence",
  "backlog-age",
  "store-near-limit",
];

export type IssueSeverity = "warning" | "critical";
export type IssueState = "open" | "acknowledged" | "resolved";

/** What an issue is about: a source, a route of a source, or a store (`database:<binding>`, `shard:<name>`). */
export interface IssueSubject {
  source: string | null;
  route: string | null;
  store: string | null;
}

/** One condition seen firing now. Messages are built from counts and times only, never payloads or secrets. */
export interface IssueCondition extends IssueSubject {
  kind: IssueKind;
  severity: IssueSeverity;
  message: string;
}

export interface Issue extends IssueSubject {
  issueKey: string;
  kind: IssueKind;
  state: IssueState;
  severity: IssueSeverity;
  message: string;
  /** When the current episode opened (a reopened issue keeps its key and history). */
  openedAt: number;
  updatedAt: number;
  acknowledgedAt: number | null;
  acknowledgeNote: string | null;
  resolvedAt: number | null;
  resolvedBy: "receiver" | "operator" | null;
  /** How many times it opened: 1, then one more per reopening. */
  episodes: number;
  /** The severity the channels were last told of in this episode; null while nothing was announced. */
  notifiedSeverity: IssueSeverity | null;
  /** When the last notice about it was queued: the rate limit's clock. */
  lastNoticeAt: number | null;
}

export type NoticeEvent = "opened" | "escalated" | "acknowledged" | "resolved";

export type HistoryEvent = NoticeEvent | "reopened" | "notice-held";

export interface IssueHistoryEntry {
  issueKey: string;
  at: number;
  event: HistoryEvent;
  detail: string;
}

export interface PlannedNotice {
  issueKey: string;
  event: NoticeEvent;
}

/** The issue key: kind, then the subject's parts that are set, joined by ":" (e.g. `breaker-open:stripe:billing`). */
export function issueKey(kind: IssueKind, subject: IssueSubject): string {
  return [kind, subject.source, subject.route, subject.store].filter((part) => part !== null).join(":");
}
