import { logError, logEvent } from "../lib/log";
import { acknowledgeIssue, type IssuePlan, planIssues, resolveIssueByHand } from "../monitor/issues/plan";
import { type ChannelStatus, IssueStore } from "../monitor/issues/store";
import type { Issue, IssueCondition, IssueHistoryEntry, IssueKind } from "../monitor/issues/types";
import { loadSources } from "../sources/registry";
import { issueChannels, retryAt, sendIssueNotice } from "./issue-notices";
import { type RecoveryProgress, recoveringRoutes, recoveryHolds } from "./recovery-issues";

/**
 * The system monitor's issues (src/monitor/issues/): evaluations turn conditions into a plan, the plan is stored,
 * and its notices go out from the monitor's alarm, one attempt per due notice per alarm, failures retried with
 * backoff (./issue-notices.ts). The monitor owns the storage and the alarm; this owns what they do for issues.
 */

/** Notices sent per alarm; the rest go on the next one, set at once. */
const NOTICES_PER_ALARM = 20;

export interface IssueListing {
  issues: (Issue & { history: IssueHistoryEntry[] })[];
  channels: ChannelStatus[];
}

export type IssueAction = { ok: true; issue: Issue } | { ok: false; status: 404 | 409; error: string };

export class IssueDesk {
  private readonly store: IssueStore;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly env: Env,
  ) {
    this.store = new IssueStore(storage.sql);
  }

  /**
   * `recoveries`: the recent route recovery jobs when the caller read them from D1 (the cron), else null; a route's
   * recovery keeps its breaker-open issue open until its job is done (./recovery-issues.ts).
   */
  async evaluate(
    firing: readonly IssueCondition[],
    observed: readonly IssueKind[],
    now: number,
    recoveries: readonly RecoveryProgress[] | null = null,
  ): Promise<number> {
    const previous = this.store.all();
    const held = recoveryHolds(previous, firing, this.recoveringRoutes(), recoveries, now);
    const conditions = [...firing, ...held.firing];
    return this.apply(planIssues(previous, conditions, new Set(observed), now, undefined, held.resolutions));
  }

  /** The routes with `recover = "auto"`; none when the config cannot be read (their issues then resolve as before). */
  private recoveringRoutes(): Set<string> {
    try {
      return recoveringRoutes(loadSources(this.env).values());
    } catch (error) {
      logError("issues.sources_unread", error, {});
      return new Set();
    }
  }

  list(options: { all?: boolean } = {}): IssueListing {
    const issues = this.store.all().filter((issue) => options.all || issue.state !== "resolved");
    return {
      issues: issues.map((issue) => ({ ...issue, history: this.store.history(issue.issueKey) })),
      channels: this.store.channels(issueChannels(this.env).map((channel) => channel.kind)),
    };
  }

  /** The sources with an issue of `kind` not resolved (open or acknowledged). */
  unresolvedSources(kind: IssueKind): Set<string> {
    return new Set(
      this.store
        .all()
        .filter((issue) => issue.kind === kind && issue.state !== "resolved" && issue.source !== null)
        .map((issue) => issue.source!),
    );
  }

  async acknowledge(key: string, note: string, now: number): Promise<IssueAction> {
    return this.act(key, (issue) => acknowledgeIssue(issue, note, now));
  }

  async resolve(key: string, note: string | null, now: number): Promise<IssueAction> {
    return this.act(key, (issue) => resolveIssueByHand(issue, now, note ?? undefined));
  }

  /** Sends what is due; answers whether notices still wait (the monitor then sets its alarm). */
  async sendDue(): Promise<void> {
    const wallNow = Date.now();
    for (const notice of this.store.due(wallNow, NOTICES_PER_ALARM)) {
      const outcome = await sendIssueNotice(this.env, notice, wallNow).catch((error: unknown) => ({
        sent: false as const,
        error: error instanceof Error ? error.message.slice(0, 200) : String(error),
        retry: true,
      }));
      if (outcome.sent) {
        this.store.sent(notice.noticeId, Date.now());
        continue;
      }
      // One reading of the clock: the wait recorded is exactly the backoff (a second read can tick locally).
      const failedAt = Date.now();
      const next = outcome.retry ? retryAt(notice.attempts + 1, failedAt) : null;
      this.store.failed(notice.noticeId, failedAt, outcome.error, next);
      logError("issue.notice_failed", new Error(outcome.error), {
        issue: notice.issue.issueKey,
        channel: notice.channel,
        notice: notice.event,
        retry: next !== null,
      });
    }
    await this.schedule();
  }

  private async act(key: string, decide: (issue: Issue) => ReturnType<typeof acknowledgeIssue>): Promise<IssueAction> {
    const issue = this.store.get(key);
    if (issue === null) return { ok: false, status: 404, error: `no issue ${key}` };
    const decision = decide(issue);
    if (!decision.ok) return { ok: false, status: 409, error: decision.reason };
    await this.apply(decision.plan);
    return { ok: true, issue: decision.plan.changed[0]! };
  }

  private async apply(plan: IssuePlan): Promise<number> {
    if (plan.changed.length === 0 && plan.notices.length === 0) return 0;
    const channels = issueChannels(this.env).map((channel) => channel.kind);
    const queued = this.storage.transactionSync(() => this.store.apply(plan, channels, Date.now()));
    for (const entry of plan.history) logEvent(`issue.${entry.event}`, { issue: entry.issueKey, detail: entry.detail });
    if (queued > 0) await this.schedule();
    return plan.changed.length;
  }

  private async schedule(): Promise<void> {
    const next = this.store.nextDueAt();
    if (next === null) return;
    const current = await this.storage.getAlarm();
    if (current === null || current > next) await this.storage.setAlarm(Math.max(next, Date.now()));
  }
}
