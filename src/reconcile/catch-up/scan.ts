import { readCheckpoint, writeCheckpoint } from "../../db/checkpoints";
import type { CatchUpSettings } from "../../sources/reconciler-settings";

/**
 * Walks a provider list that answers newest first (Stripe's events, GitHub's hook deliveries) from the present
 * back to the checkpoint minus the overlap. A page that is fully handled is recorded before the next is fetched,
 * so a run cut short by its page budget, an API error or a crash resumes where it stopped; only a scan that
 * reaches its lower bound moves the checkpoint itself, to the moment that scan began.
 */

export interface ScanCheckpoint {
  /** Every event created before this instant (epoch ms) was listed by a completed scan. */
  since: number;
  /** A scan cut short: where it started and how far it got. */
  inProgress?: { from: number; startedAt: number; cursor: string };
}

export interface ListedPage<T> {
  items: T[];
  /** Where the next page starts, or null when this page reached the scan's lower bound or the list's end. */
  nextCursor: string | null;
}

export interface ScanReport {
  pages: number;
  completed: boolean;
}

export interface ScanSteps<T> {
  /**
   * One page of the window [from, until] (epoch ms): `until` is when the scan began, so events created while it
   * runs are left to the next scan (which re-reads the overlap). `cursor` is null for a scan's first page.
   */
  fetchPage(from: number, until: number, cursor: string | null): Promise<ListedPage<T>>;
  handlePage(items: T[]): Promise<void>;
}

export async function scanNewestFirst<T>(
  env: Env,
  sourceName: string,
  reconciler: string,
  settings: CatchUpSettings,
  now: number,
  steps: ScanSteps<T>,
): Promise<ScanReport> {
  const checkpoint = (await readCheckpoint<ScanCheckpoint>(env, sourceName, reconciler)) ?? {
    since: now - settings.initialLookbackMs,
  };
  const resumed = checkpoint.inProgress;
  // A checkpoint ahead of this run's clock (clock skew, a test's future run) must never hide the present.
  const from = resumed?.from ?? Math.min(checkpoint.since, now) - settings.overlapMs;
  const startedAt = resumed?.startedAt ?? now;
  let cursor = resumed?.cursor ?? null;

  for (let pages = 1; pages <= settings.maxPages; pages++) {
    const page = await steps.fetchPage(from, startedAt, cursor);
    await steps.handlePage(page.items);
    if (page.nextCursor === null) {
      await writeCheckpoint(env, sourceName, reconciler, { since: startedAt } satisfies ScanCheckpoint, now);
      return { pages, completed: true };
    }
    cursor = page.nextCursor;
    await writeCheckpoint(
      env,
      sourceName,
      reconciler,
      { since: checkpoint.since, inProgress: { from, startedAt, cursor } } satisfies ScanCheckpoint,
      now,
    );
  }
  return { pages: settings.maxPages, completed: false };
}

export class CatchUpApiError extends Error {
  override name = "CatchUpApiError";
  constructor(
    readonly api: string,
    readonly httpStatus: number | null,
    detail: string,
  ) {
    // Never the request's headers or the response body: either could carry the API key or payloads.
    super(`${api} API ${httpStatus === null ? "unreachable" : `answered ${httpStatus}`}: ${detail}`);
  }
}

const API_TIMEOUT_MS = 15_000;

/** One API call with a timeout; a non-2xx or unreadable answer is a CatchUpApiError (the page is not handled). */
export async function callApi(api: string, url: string, init: RequestInit): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, redirect: "manual", signal: AbortSignal.timeout(API_TIMEOUT_MS) });
  } catch (error) {
    throw new CatchUpApiError(api, null, error instanceof Error ? error.name : "fetch failed");
  }
  if (response.status < 200 || response.status >= 300) {
    await response.body?.cancel();
    throw new CatchUpApiError(api, response.status, new URL(url).pathname);
  }
  return response;
}
