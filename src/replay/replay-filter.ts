/**
 * What a bulk replay job replays (docs/operating.md, "Bulk replay by filter"), as pure functions: the filter an
 * operator (or a route's recovery) wrote, checked, and the choice of which deliveries of one page of receipts it
 * replays. No I/O here: replay-jobs.ts reads the page and writes what this chooses.
 */

/** The finished statuses a job replays from: one per job. */
export const JOB_STATUSES = ["dead", "skipped", "processed"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export interface ReplayJobFilter {
  source: string;
  /** Only this route's delivery of each receipt; a receipt that never had one for it counts as `skipped` for it. */
  route?: string;
  status: JobStatus;
  eventType?: string;
  /** received_at ≥ this (epoch ms). */
  since?: number;
  /** received_at < this (epoch ms). */
  until?: number;
  /** The delivery's last error contains this text (case-insensitive). */
  error?: string;
  /** The delivery entered its status at or after this (epoch ms, D1's clock): a route's recovery, never the CLI. */
  enteredSince?: number;
}

/** A filter that cannot be right; the message is written for the caller. */
export class JobFilterError extends Error {
  override name = "JobFilterError";
}

/** Checks a filter as read from JSON (a request body, or a job row); throws JobFilterError saying what is wrong. */
export function checkJobFilter(value: unknown): ReplayJobFilter {
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new JobFilterError("the filter must be an object");
  const filter = value as Record<string, unknown>;
  const text = (name: string, required = false): string | undefined => {
    const field = filter[name];
    if (field === undefined && !required) return undefined;
    if (typeof field !== "string" || field.trim().length === 0 || field.length > 256)
      throw new JobFilterError(`${name} must be a non-empty string of at most 256 characters`);
    return field.trim();
  };
  const instant = (name: string): number | undefined => {
    const field = filter[name];
    if (field === undefined) return undefined;
    if (typeof field !== "number" || !Number.isSafeInteger(field) || field < 0)
      throw new JobFilterError(`${name} must be a time in epoch milliseconds`);
    return field;
  };
  const status = filter.status ?? "dead";
  if (!(JOB_STATUSES as readonly unknown[]).includes(status))
    throw new JobFilterError(`status must be one of ${JOB_STATUSES.join(", ")}`);
  const checked: ReplayJobFilter = {
    source: text("source", true)!,
    route: text("route"),
    status: status as JobStatus,
    eventType: text("eventType"),
    since: instant("since"),
    until: instant("until"),
    error: text("error"),
    enteredSince: instant("enteredSince"),
  };
  if (checked.since !== undefined && checked.until !== undefined && checked.since >= checked.until)
    throw new JobFilterError("since must be earlier than until");
  return Object.fromEntries(
    Object.entries(checked).filter(([, field]) => field !== undefined),
  ) as unknown as ReplayJobFilter;
}

/** One receipt of a page, as the choice reads it. */
export interface PageReceipt {
  receiptId: string;
  /** The route the receipt row carries (migrations/0014); null for a one-route source's, or when none matched. */
  route: string | null;
  filteredRoutes: string | null;
  status: string;
  lastError: string | null;
  statusEnteredAt: number | null;
}

/** One further delivery of a page's receipts (a `deliveries` row). */
export interface PageDelivery {
  receiptId: string;
  route: string;
  status: string;
  lastError: string | null;
  statusEnteredAt: number | null;
}

export type ReplayChoice =
  /** The receipt's own delivery: reset as a single replay resets it. */
  | { kind: "receipt"; receiptId: string }
  /** A further delivery's row: reset as one route's replay resets it. */
  | { kind: "delivery"; receiptId: string; route: string }
  /** The route never had a delivery of this receipt (filtered out, or added later): a new one is written. */
  | { kind: "new-delivery"; receiptId: string; route: string };

/** Statuses of a receipt whose routing is settled: a new delivery may be added beside it without racing its fan-out. */
const SETTLED = new Set(["processed", "stale", "skipped", "dead", "dismissed"]);

/**
 * The deliveries of `page` the filter replays, in received order. Without a route, the receipt's own delivery and
 * every further one in the filter's status; with one, only that route's: its row, or the receipt's own delivery when
 * the route is the receipt's, or — neither — a new delivery when the filter asks for `skipped`.
 * @param firstRoute the source's first route: a receipt that recorded no route and no filtering carries its delivery.
 */
export function chooseReplays(
  filter: ReplayJobFilter,
  page: readonly PageReceipt[],
  further: readonly PageDelivery[],
  firstRoute: string | null,
): ReplayChoice[] {
  const matches = (row: { status: string; lastError: string | null; statusEnteredAt: number | null }) =>
    row.status === filter.status &&
    (filter.error === undefined || (row.lastError ?? "").toLowerCase().includes(filter.error.toLowerCase())) &&
    (filter.enteredSince === undefined || (row.statusEnteredAt ?? 0) >= filter.enteredSince);
  const choices: ReplayChoice[] = [];
  for (const receipt of page) {
    const rows = further.filter((row) => row.receiptId === receipt.receiptId);
    const ownRoute = receipt.route ?? (receipt.filteredRoutes === null ? firstRoute : null);
    if (filter.route === undefined) {
      if (matches(receipt)) choices.push({ kind: "receipt", receiptId: receipt.receiptId });
      for (const row of rows)
        if (matches(row)) choices.push({ kind: "delivery", receiptId: row.receiptId, route: row.route });
      continue;
    }
    const row = rows.find((delivery) => delivery.route === filter.route);
    if (row) {
      if (matches(row)) choices.push({ kind: "delivery", receiptId: row.receiptId, route: row.route });
    } else if (ownRoute === filter.route) {
      if (matches(receipt)) choices.push({ kind: "receipt", receiptId: receipt.receiptId });
    } else if (
      filter.status === "skipped" &&
      SETTLED.has(receipt.status) &&
      filter.enteredSince === undefined &&
      (filter.error === undefined || matches({ ...receipt, status: "skipped" }))
    ) {
      choices.push({ kind: "new-delivery", receiptId: receipt.receiptId, route: filter.route });
    }
  }
  return choices;
}

/**
 * At most `limit` choices, cut at a receipt's boundary: the choices taken, and the receipt id the step reached (the
 * page's last when all fit, else the last receipt whose choices were all taken).
 */
export function takeChoices(
  choices: readonly ReplayChoice[],
  page: readonly PageReceipt[],
  limit: number,
): { taken: ReplayChoice[]; reached: string | null } {
  const last = page.at(-1)?.receiptId ?? null;
  if (choices.length <= limit) return { taken: [...choices], reached: last };
  // The receipt whose choices would cross the limit is left whole for the next step.
  let cutAt: string | undefined = choices[limit]!.receiptId;
  // A first receipt with more deliveries than the limit goes whole: a step always moves on.
  if (cutAt === choices[0]!.receiptId)
    cutAt = choices.find((choice) => choice.receiptId > choices[0]!.receiptId)?.receiptId;
  if (cutAt === undefined) return { taken: [...choices], reached: last };
  const taken = choices.filter((choice) => choice.receiptId < cutAt!);
  const before = page.filter((receipt) => receipt.receiptId < cutAt!).at(-1)?.receiptId ?? null;
  return { taken, reached: before };
}
