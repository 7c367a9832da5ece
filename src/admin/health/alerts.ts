import { and, desc, eq } from "drizzle-orm";
import type { Database } from "../../db/client";
import { alerts } from "../../db/schema";

/**
 * Alerts as people read them. The cron stores each incident's detail as JSON (`{"message", "facts"}`, see
 * src/reconcile/alerting.ts); this turns it back into its sentence and its numbers, so neither the API nor the
 * dashboard ever shows the JSON string. A detail that is not that JSON (hand-written, older) is its own message.
 */

export interface ReadableAlert {
  alertId: string;
  source: string | null;
  kind: string;
  state: "open" | "resolved";
  message: string | null;
  facts: Record<string, number> | null;
  openedAt: number;
  resolvedAt: number | null;
}

/** `{"message":"no live delivery for 2 h"}` → that message; anything else is shown as it is. */
export function readDetail(detail: string | null): { message: string | null; facts: Record<string, number> | null } {
  if (detail === null || detail === "") return { message: null, facts: null };
  try {
    const parsed = JSON.parse(detail) as unknown;
    if (parsed && typeof parsed === "object" && typeof (parsed as { message?: unknown }).message === "string") {
      const { message, facts } = parsed as { message: string; facts?: unknown };
      const numbers =
        facts && typeof facts === "object"
          ? Object.fromEntries(
              Object.entries(facts).filter((entry): entry is [string, number] => typeof entry[1] === "number"),
            )
          : null;
      return { message, facts: numbers && Object.keys(numbers).length > 0 ? numbers : null };
    }
  } catch {
    // not JSON: a plain sentence
  }
  return { message: detail, facts: null };
}

/**
 * @example
 *   await listAlerts(database(env), { state: "open", limit: 50 }); // [{ kind: "silence", message: "No live delivery for 2 h", … }]
 */
export async function listAlerts(
  db: Database,
  options: { source?: string; state?: "open" | "resolved"; limit: number },
): Promise<ReadableAlert[]> {
  const rows = await db
    .select({
      alertId: alerts.alertId,
      source: alerts.source,
      kind: alerts.kind,
      state: alerts.state,
      detail: alerts.detail,
      openedAt: alerts.openedAt,
      resolvedAt: alerts.resolvedAt,
    })
    .from(alerts)
    .where(
      and(
        options.source !== undefined ? eq(alerts.source, options.source) : undefined,
        options.state !== undefined ? eq(alerts.state, options.state) : undefined,
      ),
    )
    .orderBy(desc(alerts.openedAt))
    .limit(options.limit);
  return rows.map(({ detail, ...alert }) => ({ ...alert, ...readDetail(detail) }));
}
