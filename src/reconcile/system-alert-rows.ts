import type { SystemAlertKind } from "../monitor/observation";
import type { AlertRow } from "./alerting";

/** A system monitor incident as its SQLite holds it (./system-monitor.ts), and as D1's `alerts` row it becomes. */
export type AlertRecord = {
  kind: SystemAlertKind;
  alert_id: string;
  state: "open" | "resolved";
  message: string;
  opened_at: number;
  notified_at: number | null;
  resolved_at: number | null;
  resolve_notified_at: number | null;
  recorded_state: "open" | "resolved" | null;
};

export function alertRow(row: AlertRecord): AlertRow {
  return {
    alertId: row.alert_id,
    source: null,
    kind: row.kind,
    state: row.state,
    detail: JSON.stringify({ message: row.message }),
    openedAt: row.opened_at,
    resolvedAt: row.resolved_at,
    notifiedAt: row.notified_at,
    resolveNotifiedAt: row.resolve_notified_at,
  };
}
