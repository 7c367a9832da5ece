import { expect } from "vitest";
import { adminGet } from "../admin/support";
import { standinOrigin } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";

/** What GET /admin/api/issues answers, and the lanes of the forward stand-in that stand in for the three channels. */

export interface IssueView {
  issueKey: string;
  kind: string;
  source: string | null;
  route: string | null;
  state: string;
  severity: string;
  message: string;
  episodes: number;
  acknowledgeNote: string | null;
  resolvedBy: string | null;
  history: { event: string; detail: string }[];
}

export interface ChannelView {
  channel: string;
  waiting: number;
  gaveUp: number;
  lastError: string | null;
  lastSentAt: number | null;
  lastFailedAt: number | null;
}

export interface Listing {
  issues: IssueView[];
  channels: ChannelView[];
}

export type ChannelName = "slack" | "webhook" | "pagerduty";

export async function listing(all = false): Promise<Listing> {
  const response = await adminGet(`/admin/api/issues${all ? "?all=1" : ""}`);
  expect(response.status).toBe(200);
  return response.json<Listing>();
}

export async function issue(issueKey: string, all = true): Promise<IssueView | undefined> {
  return (await listing(all)).issues.find((entry) => entry.issueKey === issueKey);
}

/** One request a channel's stand-in (a lane of the forward stand-in) received. */
export interface ChannelRequest {
  headers: Record<string, string>;
  body: string;
  answer: number;
}

/** What a lane received for one issue, parsed; waits until there are `count` of them. */
export async function received(channel: ChannelName, match: string, count: number): Promise<ChannelRequest[]> {
  return eventually(
    async () => {
      const lane = await (await fetch(`${standinOrigin()}/__lane/issues-${channel}`)).json<ChannelRequest[]>();
      const requests = lane.filter(
        (request) => request.body.includes(`"${match}"`) || request.body.includes(`${match})`),
      );
      return requests.length >= count ? requests : undefined;
    },
    20_000,
    `${count} ${channel} notices for ${match}`,
  );
}

/**
 * Makes a channel's lane answer `status` to the notices about one issue only (other test files share the lane);
 * status 0 puts the lane back to its path's answer.
 */
export async function answerChannel(channel: ChannelName, status: number, match: string): Promise<void> {
  const url = `${standinOrigin()}/__lane/issues-${channel}?status=${status}&match=${encodeURIComponent(match)}`;
  expect((await fetch(url, { method: "PUT" })).status).toBe(200);
}
