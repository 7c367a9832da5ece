import { sendOutbound } from "../consumers/attempt/outbound";
import { utf8Bytes } from "../crypto/encoding";
import { secretValue } from "../lib/secrets";
import { type ChannelKind, pagerDutyBody, slackBody, webhookBody } from "../monitor/issues/notice-bodies";
import type { QueuedNotice } from "../monitor/issues/store";
import { signStandardWebhook } from "../providers/standard-webhooks";

/**
 * Where issue notices go (docs/operating.md "Issues and notices"), each channel on when its setting is:
 *   NOTIFY_SLACK_URL       a Slack incoming webhook (a secret: the URL is the credential);
 *   NOTIFY_WEBHOOK_URL     any endpoint, sent JSON signed with the Standard Webhooks scheme under the gateway signing
 *                          secret, exactly as forwards are;
 *   PAGERDUTY_ROUTING_KEY  a PagerDuty Events API v2 integration key (a secret), sent to PAGERDUTY_EVENTS_URL
 *                          (default https://events.pagerduty.com/v2/enqueue).
 */

export const PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue";
const NOTICE_TIMEOUT_MS = 10_000;
/** Waits before each retry of a failed notice; after the last one it is given up on (and shown as such). */
export const NOTICE_RETRY_DELAYS_MS = [30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000, 60 * 60_000];

export interface IssueChannel {
  kind: ChannelKind;
  url: string;
}

export function issueChannels(env: object): IssueChannel[] {
  const channels: IssueChannel[] = [];
  const slack = secretValue(env, "NOTIFY_SLACK_URL");
  if (slack !== null) channels.push({ kind: "slack", url: slack });
  const webhook = secretValue(env, "NOTIFY_WEBHOOK_URL");
  if (webhook !== null) channels.push({ kind: "webhook", url: webhook });
  if (secretValue(env, "PAGERDUTY_ROUTING_KEY") !== null)
    channels.push({ kind: "pagerduty", url: secretValue(env, "PAGERDUTY_EVENTS_URL") ?? PAGERDUTY_EVENTS_URL });
  return channels;
}

/** When a notice that failed its `attempts`-th attempt is tried again; null once the retries are spent. */
export function retryAt(attempts: number, wallNow: number): number | null {
  const delay = NOTICE_RETRY_DELAYS_MS[attempts - 1];
  return delay === undefined ? null : wallNow + delay;
}

export type NoticeOutcome = { sent: true } | { sent: false; error: string; retry: boolean };

/** One notice to one channel. Errors name a status or a setting, never a URL (a Slack URL is a secret) or a body. */
export async function sendIssueNotice(env: Env, notice: QueuedNotice, wallNow: number): Promise<NoticeOutcome> {
  const channel = issueChannels(env).find((entry) => entry.kind === notice.channel);
  if (channel === undefined)
    return { sent: false, error: `channel ${notice.channel} is no longer configured`, retry: false };
  const webhookId = `${notice.issue.issueKey}.${notice.event}.${notice.noticeId}`;
  const headers: Record<string, string> = { "content-type": "application/json" };
  let body: Uint8Array;
  if (channel.kind === "slack") {
    body = utf8Bytes(JSON.stringify(slackBody(notice.issue, notice.event)));
  } else if (channel.kind === "pagerduty") {
    const routingKey = secretValue(env, "PAGERDUTY_ROUTING_KEY") ?? "";
    body = utf8Bytes(JSON.stringify(pagerDutyBody(notice.issue, notice.event, routingKey)));
  } else {
    const secret = secretValue(env, env.GATEWAY_SIGNING_SECRET_NAME);
    if (secret === null) {
      return {
        sent: false,
        error: `secret ${env.GATEWAY_SIGNING_SECRET_NAME} is not set; notices are never sent unsigned`,
        retry: true,
      };
    }
    body = utf8Bytes(JSON.stringify(webhookBody(notice.issue, notice.event, wallNow)));
    // The signature's timestamp is transport freshness, against the receiver's clock: the wall clock.
    const timestamp = Math.floor(wallNow / 1000);
    headers["webhook-id"] = webhookId;
    headers["webhook-timestamp"] = String(timestamp);
    headers["webhook-signature"] = await signStandardWebhook(secret, webhookId, timestamp, body);
  }
  const result = await sendOutbound({
    url: channel.url,
    body,
    headers,
    timeoutMs: NOTICE_TIMEOUT_MS,
    idempotencyKey: webhookId,
  });
  if (result.kind === "delivered") {
    await result.response.body?.cancel();
    return { sent: true };
  }
  return { sent: false, error: `${notice.channel}: ${result.error}`, retry: result.kind !== "permanent" };
}
