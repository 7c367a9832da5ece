import { DurableObject } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { batchEach } from "../db/batch";
import { database } from "../db/client";
import { alerts } from "../db/schema";
import { logError, logEvent } from "../lib/log";
import { ulid } from "../lib/ulid";
import { nextState } from "../monitor/conditions";
import type { IssueCondition, IssueKind } from "../monitor/issues/types";
import type { Observation, SystemAlertKind } from "../monitor/observation";
import type { SignatureCounts } from "../monitor/signature-tally";
import { notify } from "./alerting";
import { SYSTEM_ISSUE_KINDS, systemIssueConditions } from "./issue-conditions";
import { type IssueAction, IssueDesk, type IssueListing } from "./issue-desk";
import type { Recoveries } from "./recovery-issues";
import { SignatureWatch } from "./signature-watch";
import { type AlertRecord, alertRow } from "./system-alert-rows";

/**
 * The one place that remembers which system alerts are open (src/monitor/conditions.ts), in its own SQLite: it
 * works while D1 is down. The claim shards and the cron report what they see; each kind opens one incident however
 * many reporters see it and however often they report, and each incident is announced once when it opens and once
 * when it resolves, through the same signed notice as the cron's alerts (ALERT_WEBHOOK_URL, or the log). Once D1
 * answers, every incident is copied into D1's `alerts` table (source NULL) with its notice times, so the cron
 * never announces it again.
 *
 * One instance, by name: every report is a few rows, and reports come only on a change a reporter saw.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS monitor_alerts (
  alert_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  message TEXT NOT NULL,
  opened_at INTEGER NOT NULL,
  notified_at INTEGER,
  resolved_at INTEGER,
  resolve_notified_at INTEGER,
  recorded_state TEXT
);
CREATE TABLE IF NOT EXISTS monitor_reporters (
  kind TEXT NOT NULL,
  reporter TEXT NOT NULL,
  PRIMARY KEY (kind, reporter)
) WITHOUT ROWID;
`;

export const SYSTEM_MONITOR_NAME = "system";

/** The issue kinds the monitor decides from what it holds itself: its alerts, and the signature counts. */
const MONITOR_ISSUE_KINDS: readonly IssueKind[] = [...SYSTEM_ISSUE_KINDS, "signature-failures"];

export interface SystemAlert {
  alertId: string;
  kind: SystemAlertKind;
  state: "open" | "resolved";
  message: string;
  openedAt: number;
  resolvedAt: number | null;
  notifiedAt: number | null;
  resolveNotifiedAt: number | null;
  /** What D1's `alerts` table holds of it so far: null until D1 answered once. */
  recordedState: "open" | "resolved" | null;
  /** Who sees it firing now. */
  reporters: string[];
}

export class SystemMonitor extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly desk: IssueDesk;
  private readonly signatures: SignatureWatch;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    this.desk = new IssueDesk(ctx.storage, env);
    this.signatures = new SignatureWatch(this.sql, env);
  }

  /**
   * The cron's evaluation of issues (src/monitor/issues/): the conditions it read from D1, which kinds it read in
   * full, the route recoveries it read, and the monitor's own alerts (breakers, stores), which it always knows in full.
   */
  async evaluateIssues(firing: IssueCondition[], observed: IssueKind[], now: number, recoveries: Recoveries = null) {
    const kinds = [...observed, ...MONITOR_ISSUE_KINDS];
    return this.desk.evaluate([...firing, ...this.ownConditions(now)], kinds, now, recoveries);
  }

  /**
   * An isolate's signature counts (src/monitor/signature-tally.ts): kept, judged at once, and answered with the
   * sources whose verified counts the isolate should send from now on.
   */
  async reportSignatures(report: SignatureCounts[], now: number): Promise<string[]> {
    this.ctx.storage.transactionSync(() => this.signatures.record(report, now));
    await this.desk
      .evaluate(this.ownConditions(now), MONITOR_ISSUE_KINDS, now)
      .catch((error) => logError("monitor.issues_failed", error, {}));
    return this.signatures.watched(now, this.desk.unresolvedSources("signature-failures"));
  }

  private ownConditions(now: number): IssueCondition[] {
    const open = this.desk.unresolvedSources("signature-failures");
    return [...systemIssueConditions(this.list()), ...this.signatures.conditions(now, open)];
  }

  issues(options: { all?: boolean } = {}): IssueListing {
    return this.desk.list(options);
  }

  acknowledgeIssue(issueKey: string, note: string, now: number): Promise<IssueAction> {
    return this.desk.acknowledge(issueKey, note, now);
  }

  resolveIssue(issueKey: string, note: string | null, now: number): Promise<IssueAction> {
    return this.desk.resolve(issueKey, note, now);
  }

  /** Issue notices due (first attempts and retries). */
  override async alarm(): Promise<void> {
    await this.desk.sendDue();
  }

  /**
   * Applies observations, announces what opened or resolved, and, when `d1Reachable`, copies incidents into D1.
   * Returns the incidents as they stand.
   */
  async report(
    observations: Observation[],
    options: { now?: number; d1Reachable?: boolean } = {},
  ): Promise<SystemAlert[]> {
    const now = options.now ?? Date.now();
    for (const observation of observations) this.apply(observation, now);
    // A breaker or a store issue opens (or resolves) with the report, not at the next cron run.
    await this.desk
      .evaluate(this.ownConditions(now), MONITOR_ISSUE_KINDS, now)
      .catch((error) => logError("monitor.issues_failed", error, {}));
    await this.announce(now);
    if (options.d1Reachable) await this.recordInD1().catch((error) => logError("monitor.record_failed", error, {}));
    return this.list();
  }

  /** Every incident the monitor still holds: open ones, and resolved ones not yet announced or recorded. */
  list(): SystemAlert[] {
    const reporters = this.sql
      .exec<{ kind: string; reporter: string }>("SELECT kind, reporter FROM monitor_reporters")
      .toArray();
    return this.sql
      .exec<AlertRecord>("SELECT * FROM monitor_alerts ORDER BY opened_at")
      .toArray()
      .map((row) => ({
        alertId: row.alert_id,
        kind: row.kind,
        state: row.state,
        message: row.message,
        openedAt: row.opened_at,
        resolvedAt: row.resolved_at,
        notifiedAt: row.notified_at,
        resolveNotifiedAt: row.resolve_notified_at,
        recordedState: row.recorded_state,
        reporters:
          row.state === "open"
            ? reporters.filter((entry) => entry.kind === row.kind).map((entry) => entry.reporter)
            : [],
      }));
  }

  private apply(observation: Observation, now: number): void {
    this.ctx.storage.transactionSync(() => {
      const open = this.sql
        .exec<AlertRecord>("SELECT * FROM monitor_alerts WHERE kind = ? AND state = 'open'", observation.kind)
        .toArray()[0];
      const firing = new Set(
        this.sql
          .exec<{ reporter: string }>("SELECT reporter FROM monitor_reporters WHERE kind = ?", observation.kind)
          .toArray()
          .map((row) => row.reporter),
      );
      const { reporters, transition } = nextState(observation.kind, firing, observation, open !== undefined);
      this.sql.exec("DELETE FROM monitor_reporters WHERE kind = ?", observation.kind);
      for (const reporter of reporters)
        this.sql.exec("INSERT INTO monitor_reporters (kind, reporter) VALUES (?, ?)", observation.kind, reporter);
      if (transition === "open") {
        this.sql.exec(
          "INSERT INTO monitor_alerts (alert_id, kind, state, message, opened_at) VALUES (?, ?, 'open', ?, ?)",
          ulid(now),
          observation.kind,
          observation.message,
          now,
        );
      } else if (transition === "resolve") {
        this.sql.exec(
          "UPDATE monitor_alerts SET state = 'resolved', resolved_at = ? WHERE alert_id = ?",
          now,
          open!.alert_id,
        );
      }
    });
  }

  /** Opening notices, then resolving ones; a failed notice is tried again on the next report. */
  private async announce(now: number): Promise<void> {
    const due = this.sql
      .exec<AlertRecord>(
        "SELECT * FROM monitor_alerts WHERE notified_at IS NULL OR (state = 'resolved' AND resolve_notified_at IS NULL)",
      )
      .toArray();
    for (const row of due) {
      if (row.notified_at === null && !(await this.send(row, "opened", now))) continue;
      if (row.state === "resolved") await this.send(row, "resolved", now);
    }
  }

  private async send(row: AlertRecord, transition: "opened" | "resolved", now: number): Promise<boolean> {
    const column = transition === "opened" ? "notified_at" : "resolve_notified_at";
    // Claimed before the send: a report arriving while this one awaits the webhook finds it taken.
    const claimed = this.sql.exec(
      `UPDATE monitor_alerts SET ${column} = ? WHERE alert_id = ? AND ${column} IS NULL`,
      now,
      row.alert_id,
    );
    claimed.toArray();
    if (claimed.rowsWritten === 0) return false;
    logEvent(`system_alert.${transition}`, { alert: row.alert_id, kind: row.kind, message: row.message });
    try {
      await notify(this.env, alertRow({ ...row, [column]: now }), transition, now);
      return true;
    } catch (error) {
      logError("system_alert.notify_failed", error, { alert: row.alert_id, transition });
      // Released, so the next report tries again; the receiver dedupes on webhook-id if only our side failed.
      this.sql.exec(`UPDATE monitor_alerts SET ${column} = NULL WHERE alert_id = ?`, row.alert_id);
      return false;
    }
  }

  /**
   * Copies every announced incident into D1 (one batch), then forgets the resolved ones D1 now holds. An
   * incident whose notice has not gone out yet waits: recorded without its notice time, the cron would send it.
   */
  async recordInD1(): Promise<number> {
    const rows = this.sql
      .exec<AlertRecord>(
        `SELECT * FROM monitor_alerts WHERE notified_at IS NOT NULL AND (state = 'open' OR resolve_notified_at IS NOT NULL)
         AND recorded_state IS NOT state`,
      )
      .toArray();
    if (rows.length === 0) return 0;
    const db = database(this.env);
    await batchEach(db, rows, (row) =>
      db
        .insert(alerts)
        .values({ ...alertRow(row), source: null })
        .onConflictDoUpdate({
          target: alerts.alertId,
          set: {
            state: sql`excluded.state`,
            detail: sql`excluded.detail`,
            resolvedAt: sql`excluded.resolved_at`,
            notifiedAt: sql`excluded.notified_at`,
            resolveNotifiedAt: sql`excluded.resolve_notified_at`,
          },
        }),
    );
    this.ctx.storage.transactionSync(() => {
      for (const row of rows) {
        if (row.state === "resolved")
          this.sql.exec("DELETE FROM monitor_alerts WHERE alert_id = ? AND state = 'resolved'", row.alert_id);
        else
          this.sql.exec(
            "UPDATE monitor_alerts SET recorded_state = 'open' WHERE alert_id = ? AND state = 'open'",
            row.alert_id,
          );
      }
    });
    return rows.length;
  }
}
