/**
 * The receipt tables `npm run cli -- sql` copies (./audit-rows.ts says how each is read). A module of its own, with
 * no imports, so the CLI reads the same list without bundling the Worker's storage code.
 */
export const AUDIT_TABLE_NAMES = ["receipts", "deliveries", "attempts", "replays", "quarantine"] as const;

export type AuditTableName = (typeof AUDIT_TABLE_NAMES)[number];

export function isAuditTable(name: string): name is AuditTableName {
  return (AUDIT_TABLE_NAMES as readonly string[]).includes(name);
}
