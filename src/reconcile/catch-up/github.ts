import type { SourceConfig } from "../../sources/config";
import type { CatchUpSettings } from "../../sources/reconciler-settings";
import { type CatchUpCounts, keysAlreadyStored } from "./claim-missing";
import { callApi, type ListedPage, scanNewestFirst } from "./scan";

/**
 * GitHub never retries a failed delivery by itself, and its list API returns delivery summaries, not payloads:
 * catch-up lists the hook's recent deliveries (`GET /<hook>/deliveries`, newest first, Link rel="next") and asks
 * GitHub to send again each one that failed and that we never stored (`POST /<hook>/deliveries/<id>/attempts`).
 * The redelivery keeps its X-GitHub-Delivery GUID, so it arrives through the live route as the same key and the
 * claim shard dedupes it like any resend.
 */

const PAGE_SIZE = 100;
/** GitHub keeps deliveries for 3 days; after this many redeliveries of one GUID we stop asking (the alert stays open). */
const MAX_REDELIVERIES_PER_GUID = 3;

interface HookDelivery {
  id: number;
  guid: string;
  delivered_at: string;
  redelivery: boolean;
  status_code: number;
}

function succeeded(delivery: HookDelivery): boolean {
  return delivery.status_code >= 200 && delivery.status_code < 300;
}

/** The `cursor` of the Link header's rel="next" URL, or null on the last page. */
export function nextCursorFromLink(link: string | null): string | null {
  if (!link) return null;
  for (const part of link.split(",")) {
    const match = /<([^>]+)>\s*;\s*rel="next"/.exec(part);
    if (match) return new URL(match[1]!).searchParams.get("cursor");
  }
  return null;
}

export async function catchUpGithub(
  env: Env,
  source: SourceConfig,
  settings: CatchUpSettings,
  token: string,
  now: number,
): Promise<CatchUpCounts> {
  const counts: CatchUpCounts = {
    pages: 0,
    completed: false,
    listed: 0,
    alreadyReceived: 0,
    missingClaimed: 0,
    redeliveriesRequested: 0,
    redeliveriesWithheld: 0,
  };
  const hookUrl = `${settings.baseUrl}/${settings.hookPath}`;
  const headers = {
    authorization: `Bearer ${token}`,
    accept: "application/vnd.github+json",
    "x-github-api-version": "2022-11-28",
    "user-agent": "edge-webhook-receiver-reconciler",
  };
  // Newer entries come first, so by the time a failed original is seen, any later success or redelivery of the
  // same GUID has been seen too.
  const delivered = new Set<string>();
  const redeliveries = new Map<string, number>();
  const requested = new Set<string>();

  const report = await scanNewestFirst<HookDelivery>(env, source.name, "github-deliveries", settings, now, {
    async fetchPage(from, until, cursor): Promise<ListedPage<HookDelivery>> {
      const url = new URL(`${hookUrl}/deliveries`);
      url.searchParams.set("per_page", String(PAGE_SIZE));
      if (cursor) url.searchParams.set("cursor", cursor);
      const response = await callApi("github", url.toString(), { headers });
      const page = (await response.json()) as HookDelivery[];
      const items = Array.isArray(page)
        ? page.filter((delivery) => typeof delivery.guid === "string" && Number.isInteger(delivery.id))
        : [];
      const deliveredAt = (delivery: HookDelivery) => Date.parse(delivery.delivered_at);
      const reachedBound = items.some((delivery) => deliveredAt(delivery) < from);
      // Deliveries newer than the scan's start belong to the next scan, which re-reads the overlap.
      const inWindow = items.filter((delivery) => deliveredAt(delivery) >= from && deliveredAt(delivery) <= until);
      return { items: inWindow, nextCursor: reachedBound ? null : nextCursorFromLink(response.headers.get("link")) };
    },
    async handlePage(deliveries) {
      counts.listed += deliveries.length;
      const candidates: HookDelivery[] = [];
      for (const delivery of deliveries) {
        if (succeeded(delivery)) delivered.add(delivery.guid);
        if (delivery.redelivery) redeliveries.set(delivery.guid, (redeliveries.get(delivery.guid) ?? 0) + 1);
        if (succeeded(delivery) || delivered.has(delivery.guid) || requested.has(delivery.guid)) continue;
        requested.add(delivery.guid);
        candidates.push(delivery);
      }
      // GitHub may have seen a failure for a delivery we did store (our answer was lost or late): not missing.
      const stored = await keysAlreadyStored(
        env,
        source.name,
        candidates.map((delivery) => delivery.guid),
      );
      counts.alreadyReceived += deliveries.length - candidates.length + stored.size;
      for (const delivery of candidates) {
        if (stored.has(delivery.guid)) continue;
        if ((redeliveries.get(delivery.guid) ?? 0) >= MAX_REDELIVERIES_PER_GUID) {
          counts.redeliveriesWithheld++;
          continue;
        }
        await callApi("github", `${hookUrl}/deliveries/${delivery.id}/attempts`, { method: "POST", headers });
        counts.redeliveriesRequested++;
      }
    },
  });
  counts.pages = report.pages;
  counts.completed = report.completed;
  return counts;
}
