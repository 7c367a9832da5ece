import type { Issue, NoticeEvent } from "./types";

/**
 * What each channel kind receives for one notice, as pure functions of the issue (as it stood when the notice was
 * queued) and the event. Counts, names and times only: an issue's message never holds a payload or a secret.
 */

export type ChannelKind = "slack" | "webhook" | "pagerduty";

const VERB: Record<NoticeEvent, string> = {
  opened: "Opened",
  escalated: "Escalated",
  acknowledged: "Acknowledged",
  resolved: "Resolved",
};

/** `stripe / billing`, `stripe`, or `database:DB`: what the issue is about, for people. */
export function subjectText(issue: Pick<Issue, "source" | "route" | "store">): string {
  return [issue.source, issue.route, issue.store].filter((part) => part !== null).join(" / ") || "receiver";
}

/** Slack incoming webhook: one line of text (mrkdwn), the same for every event. */
export function slackBody(issue: Issue, event: NoticeEvent): { text: string } {
  const note = event === "acknowledged" && issue.acknowledgeNote ? ` Note: ${issue.acknowledgeNote}` : "";
  return {
    text: `[${issue.severity}] ${VERB[event]}: ${issue.kind} on ${subjectText(issue)}. ${issue.message}${note} (issue ${issue.issueKey})`,
  };
}

/** The generic webhook's JSON (signed by the sender with the Standard Webhooks scheme, as forwards are). */
export function webhookBody(issue: Issue, event: NoticeEvent, at: number) {
  return {
    type: `issue.${event}`,
    timestamp: new Date(at).toISOString(),
    data: {
      issueKey: issue.issueKey,
      kind: issue.kind,
      source: issue.source,
      route: issue.route,
      store: issue.store,
      state: issue.state,
      severity: issue.severity,
      message: issue.message,
      openedAt: new Date(issue.openedAt).toISOString(),
      acknowledgeNote: issue.acknowledgeNote,
      resolvedAt: issue.resolvedAt === null ? null : new Date(issue.resolvedAt).toISOString(),
      resolvedBy: issue.resolvedBy,
    },
  };
}

const PAGERDUTY_ACTION: Record<NoticeEvent, "trigger" | "acknowledge" | "resolve"> = {
  opened: "trigger",
  escalated: "trigger",
  acknowledged: "acknowledge",
  resolved: "resolve",
};

/**
 * PagerDuty Events API v2: the issue key is the dedup key, so an escalation updates the incident its opening
 * triggered, and acknowledge and resolve act on it. Only a trigger carries a payload.
 */
export function pagerDutyBody(issue: Issue, event: NoticeEvent, routingKey: string) {
  const action = PAGERDUTY_ACTION[event];
  const base = { routing_key: routingKey, event_action: action, dedup_key: issue.issueKey };
  if (action !== "trigger") return base;
  return {
    ...base,
    payload: {
      summary: `${issue.kind} on ${subjectText(issue)}: ${issue.message}`.slice(0, 1024),
      source: "webhook-receiver",
      severity: issue.severity,
      component: subjectText(issue),
      group: issue.kind,
      custom_details: {
        issueKey: issue.issueKey,
        state: issue.state,
        openedAt: new Date(issue.openedAt).toISOString(),
      },
    },
  };
}
