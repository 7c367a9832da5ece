import type { IssuePlan } from "./plan";
import type { Issue, IssueHistoryEntry, IssueKind, IssueSeverity, IssueState, NoticeEvent } from "./types";

/**
 * Issues in the system monitor's own SQLite (src/reconcile/system-monitor.ts): rare, so never a D1 row per event,
 * and readable while D1 is down. Three tables: the issues, their history, and the notices waiting for (or done
 * with) each channel. History is trimmed to the newest HISTORY_KEPT entries per issue; notices done with are
 * trimmed to the newest NOTICES_KEPT per channel, so a failing channel stays visible without the table growing.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS issues (
  issue_key TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  source TEXT,
  route TEXT,
  store TEXT,
  state TEXT NOT NULL,
  severity TEXT NOT NULL,
  message TEXT NOT NULL,
  opened_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  acknowledged_at INTEGER,
  acknowledge_note TEXT,
  resolved_at INTEGER,
  resolved_by TEXT,
  episodes INTEGER NOT NULL,
  notified_severity TEXT,
  last_notice_at INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS issue_history (
  entry INTEGER PRIMARY KEY AUTOINCREMENT,
  issue_key TEXT NOT NULL,
  at INTEGER NOT NULL,
  event TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS issue_history_by_issue ON issue_history (issue_key, entry);
CREATE TABLE IF NOT EXISTS issue_notices (
  notice_id INTEGER PRIMARY KEY AUTOINCREMENT,
  issue_key TEXT NOT NULL,
  event TEXT NOT NULL,
  channel TEXT NOT NULL,
  issue TEXT NOT NULL,
  queued_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  sent_at INTEGER,
  gave_up_at INTEGER,
  last_failed_at INTEGER,
  last_error TEXT
);
CREATE INDEX IF NOT EXISTS issue_notices_due ON issue_notices (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
`;

const HISTORY_KEPT = 100;
const NOTICES_KEPT = 50;

/** A notice for one channel: the issue as it stood when the notice was queued. */
export interface QueuedNotice {
  noticeId: number;
  channel: string;
  event: NoticeEvent;
  issue: Issue;
  attempts: number;
}

export interface ChannelStatus {
  channel: string;
  /** Notices waiting for a (first or further) attempt. */
  waiting: number;
  /** Notices given up on after every retry failed. */
  gaveUp: number;
  lastSentAt: number | null;
  lastFailedAt: number | null;
  lastError: string | null;
}

type IssueRow = {
  issue_key: string;
  kind: IssueKind;
  source: string | null;
  route: string | null;
  store: string | null;
  state: IssueState;
  severity: IssueSeverity;
  message: string;
  opened_at: number;
  updated_at: number;
  acknowledged_at: number | null;
  acknowledge_note: string | null;
  resolved_at: number | null;
  resolved_by: "receiver" | "operator" | null;
  episodes: number;
  notified_severity: IssueSeverity | null;
  last_notice_at: number | null;
};

export class IssueStore {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(SCHEMA);
  }

  all(): Issue[] {
    return this.sql.exec<IssueRow>("SELECT * FROM issues ORDER BY opened_at DESC").toArray().map(fromRow);
  }

  get(key: string): Issue | null {
    const row = this.sql.exec<IssueRow>("SELECT * FROM issues WHERE issue_key = ?", key).toArray()[0];
    return row ? fromRow(row) : null;
  }

  history(key: string): IssueHistoryEntry[] {
    return this.sql
      .exec<{ issue_key: string; at: number; event: IssueHistoryEntry["event"]; detail: string }>(
        "SELECT issue_key, at, event, detail FROM issue_history WHERE issue_key = ? ORDER BY entry",
        key,
      )
      .toArray()
      .map((row) => ({ issueKey: row.issue_key, at: row.at, event: row.event, detail: row.detail }));
  }

  /** Writes a plan: the changed issues, their history, and one queued notice per channel per planned notice. */
  apply(plan: IssuePlan, channels: readonly string[], wallNow: number): number {
    const changed = new Map(plan.changed.map((issue) => [issue.issueKey, issue]));
    let queued = 0;
    for (const issue of plan.changed) {
      this.sql.exec(
        `INSERT OR REPLACE INTO issues (issue_key, kind, source, route, store, state, severity, message, opened_at,
           updated_at, acknowledged_at, acknowledge_note, resolved_at, resolved_by, episodes, notified_severity,
           last_notice_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        issue.issueKey,
        issue.kind,
        issue.source,
        issue.route,
        issue.store,
        issue.state,
        issue.severity,
        issue.message,
        issue.openedAt,
        issue.updatedAt,
        issue.acknowledgedAt,
        issue.acknowledgeNote,
        issue.resolvedAt,
        issue.resolvedBy,
        issue.episodes,
        issue.notifiedSeverity,
        issue.lastNoticeAt,
      );
    }
    for (const entry of plan.history) {
      this.sql.exec(
        "INSERT INTO issue_history (issue_key, at, event, detail) VALUES (?, ?, ?, ?)",
        entry.issueKey,
        entry.at,
        entry.event,
        entry.detail,
      );
      this.sql.exec(
        `DELETE FROM issue_history WHERE issue_key = ? AND entry NOT IN
           (SELECT entry FROM issue_history WHERE issue_key = ? ORDER BY entry DESC LIMIT ${HISTORY_KEPT})`,
        entry.issueKey,
        entry.issueKey,
      );
    }
    for (const notice of plan.notices) {
      const issue = changed.get(notice.issueKey) ?? this.get(notice.issueKey);
      if (issue === null) continue;
      for (const channel of channels) {
        this.sql.exec(
          "INSERT INTO issue_notices (issue_key, event, channel, issue, queued_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?)",
          notice.issueKey,
          notice.event,
          channel,
          JSON.stringify(issue),
          wallNow,
          wallNow,
        );
        queued++;
      }
    }
    return queued;
  }

  /** Notices whose (next) attempt is due, oldest first. */
  due(wallNow: number, limit: number): QueuedNotice[] {
    return this.sql
      .exec<{ notice_id: number; channel: string; event: NoticeEvent; issue: string; attempts: number }>(
        `SELECT notice_id, channel, event, issue, attempts FROM issue_notices
         WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ? ORDER BY notice_id LIMIT ?`,
        wallNow,
        limit,
      )
      .toArray()
      .map((row) => ({
        noticeId: row.notice_id,
        channel: row.channel,
        event: row.event,
        issue: JSON.parse(row.issue) as Issue,
        attempts: row.attempts,
      }));
  }

  /** When the next waiting notice is due; null when none waits. */
  nextDueAt(): number | null {
    const row = this.sql
      .exec<{ next: number | null }>("SELECT MIN(next_attempt_at) AS next FROM issue_notices")
      .toArray()[0];
    return row?.next ?? null;
  }

  sent(noticeId: number, wallNow: number): void {
    this.sql.exec(
      "UPDATE issue_notices SET attempts = attempts + 1, sent_at = ?, next_attempt_at = NULL, last_error = NULL WHERE notice_id = ?",
      wallNow,
      noticeId,
    );
    this.trim(noticeId);
  }

  /** A failed attempt: tried again at `retryAt`, or given up on (null). The error names a status, never a body. */
  failed(noticeId: number, wallNow: number, error: string, retryAt: number | null): void {
    this.sql.exec(
      `UPDATE issue_notices SET attempts = attempts + 1, last_error = ?, last_failed_at = ?, next_attempt_at = ?,
         gave_up_at = CASE WHEN ? IS NULL THEN ? ELSE NULL END WHERE notice_id = ?`,
      error.slice(0, 300),
      wallNow,
      retryAt,
      retryAt,
      wallNow,
      noticeId,
    );
    if (retryAt === null) this.trim(noticeId);
  }

  channels(configured: readonly string[]): ChannelStatus[] {
    const rows = this.sql
      .exec<{
        channel: string;
        waiting: number;
        gave_up: number;
        last_sent: number | null;
        last_failed: number | null;
      }>(
        `SELECT channel, SUM(next_attempt_at IS NOT NULL) AS waiting, SUM(gave_up_at IS NOT NULL) AS gave_up,
           MAX(sent_at) AS last_sent, MAX(last_failed_at) AS last_failed
         FROM issue_notices GROUP BY channel`,
      )
      .toArray();
    const names = [...new Set([...configured, ...rows.map((row) => row.channel)])];
    return names.map((channel) => {
      const row = rows.find((entry) => entry.channel === channel);
      const lastError =
        this.sql
          .exec<{ last_error: string }>(
            "SELECT last_error FROM issue_notices WHERE channel = ? AND last_error IS NOT NULL ORDER BY last_failed_at DESC LIMIT 1",
            channel,
          )
          .toArray()[0]?.last_error ?? null;
      return {
        channel,
        waiting: row?.waiting ?? 0,
        gaveUp: row?.gave_up ?? 0,
        lastSentAt: row?.last_sent ?? null,
        lastFailedAt: row?.last_failed ?? null,
        lastError,
      };
    });
  }

  private trim(noticeId: number): void {
    this.sql.exec(
      `DELETE FROM issue_notices WHERE next_attempt_at IS NULL AND channel = (SELECT channel FROM issue_notices WHERE notice_id = ?)
         AND notice_id NOT IN (SELECT notice_id FROM issue_notices WHERE next_attempt_at IS NULL AND channel =
           (SELECT channel FROM issue_notices WHERE notice_id = ?) ORDER BY notice_id DESC LIMIT ${NOTICES_KEPT})`,
      noticeId,
      noticeId,
    );
  }
}

function fromRow(row: IssueRow): Issue {
  return {
    issueKey: row.issue_key,
    kind: row.kind,
    source: row.source,
    route: row.route,
    store: row.store,
    state: row.state,
    severity: row.severity,
    message: row.message,
    openedAt: row.opened_at,
    updatedAt: row.updated_at,
    acknowledgedAt: row.acknowledged_at,
    acknowledgeNote: row.acknowledge_note,
    resolvedAt: row.resolved_at,
    resolvedBy: row.resolved_by,
    episodes: row.episodes,
    notifiedSeverity: row.notified_severity,
    lastNoticeAt: row.last_notice_at,
  };
}
