// `audit-log [--actor A] [--action X] [--outcome allowed|refused] [--limit N] [--before CURSOR]`: the operator audit
// log (GET /admin/api/audit-log), newest first: who replayed, dismissed, paused, approved … and whether their role
// allowed it.
import { dateTime, printable } from "../format.mjs";
import { adminRequest } from "../http.mjs";

/**
 * @param {{ actor?: string, action?: string, outcome?: string, limit?: string, before?: string, json?: boolean }
 *   & import("../project.mjs").ProjectOptions} options
 */
export async function auditLog(options) {
  const query = new URLSearchParams();
  for (const name of /** @type {const} */ (["actor", "action", "outcome", "limit", "before"])) {
    const value = options[name];
    if (value !== undefined) query.set(name, value);
  }
  const path = query.size > 0 ? `/audit-log?${query}` : "/audit-log";
  /** @type {{ actions: import("../../../src/admin/audit-log/list").OperatorActionRow[], nextCursor: string | null }} */
  const page = await adminRequest(options, path);
  if (options.json) {
    console.log(JSON.stringify(page));
    return 0;
  }
  if (page.actions.length === 0) {
    console.log("no operator action recorded");
    return 0;
  }
  console.log(
    `${"WHEN".padEnd(26)}${"ACTOR".padEnd(28)}${"ROLE".padEnd(10)}${"VIA".padEnd(11)}${"ACTION".padEnd(13)}${"OUTCOME".padEnd(9)}${"AFFECTED".padStart(8)}  TARGET`,
  );
  for (const row of page.actions) {
    console.log(
      `${dateTime(row.at).padEnd(26)}${printable(row.actor).padEnd(28)}${row.role.padEnd(10)}${row.via.padEnd(11)}${row.action.padEnd(13)}${row.outcome.padEnd(9)}${String(row.affected).padStart(8)}  ${printable(row.target)}`,
    );
  }
  if (page.nextCursor) console.log(`older: npm run cli -- audit-log --before ${page.nextCursor}`);
  return 0;
}
