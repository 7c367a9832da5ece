// `issues [--all]`, `issues ack <key> --note <text>`, `issues resolve <key> [--note <text>]`: the receiver's issues
// through the admin API (GET /admin/api/issues, POST …/<key>/acknowledge|resolve). docs/operating.md "Issues and
// notices" says what opens one and what each state means.
import { CliError, EXIT } from "../errors.mjs";
import { dateTime, printable } from "../format.mjs";
import { adminRequest } from "../http.mjs";

export const ISSUE_ACTIONS = ["list", "ack", "resolve"];

/**
 * @param {string | undefined} action list (default) | ack | resolve
 * @param {string | undefined} issueKey
 * @param {{ json?: boolean, all?: boolean, note?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function issues(action = "list", issueKey, options) {
  if (!ISSUE_ACTIONS.includes(action))
    throw new CliError(
      `unknown action ${JSON.stringify(action)}: use issues [--all], issues ack <key> --note <text> or issues resolve <key>`,
      EXIT.usage,
    );
  if (action === "list") {
    if (issueKey !== undefined) throw new CliError("issues lists every issue: it takes no key", EXIT.usage);
    const answer = await adminRequest(options, `/issues${options.all ? "?all=1" : ""}`);
    if (options.json) console.log(JSON.stringify(answer));
    else printIssues(answer, Boolean(options.all));
    return 0;
  }
  if (!issueKey) throw new CliError(`issues ${action} needs the issue's key, as issues lists it`, EXIT.usage);
  if (action === "ack" && !options.note)
    throw new CliError("issues ack needs --note: say what is being done about it", EXIT.usage);
  const change = action === "ack" ? "acknowledge" : "resolve";
  const answer = await adminRequest(options, `/issues/${encodeURIComponent(issueKey)}/${change}`, {
    method: "POST",
    body: options.note ? { note: options.note } : {},
  });
  if (options.json) console.log(JSON.stringify(answer));
  else console.log(`${printable(answer.issue.issueKey)}: ${answer.issue.state}`);
  return 0;
}

/**
 * @param {{ issues: Array<Record<string, any>>, channels: Array<Record<string, any>> }} answer
 * @param {boolean} all
 */
function printIssues(answer, all) {
  if (answer.issues.length === 0) console.log(all ? "no issues" : "no open issues");
  for (const issue of answer.issues) {
    console.log(`${printable(issue.issueKey)}  ${issue.state}  ${issue.severity}  opened ${dateTime(issue.openedAt)}`);
    console.log(`  ${printable(issue.message)}`);
    if (issue.acknowledgeNote) console.log(`  note: ${printable(issue.acknowledgeNote)}`);
    if (issue.state === "resolved")
      console.log(
        `  resolved ${dateTime(issue.resolvedAt)} by ${issue.resolvedBy === "operator" ? "an operator" : "the receiver"}`,
      );
  }
  for (const channel of answer.channels) {
    const failing =
      channel.lastFailedAt !== null && (channel.lastSentAt === null || channel.lastFailedAt > channel.lastSentAt);
    console.log(
      `channel ${channel.channel}: ${failing ? `FAILING (${printable(channel.lastError)})` : "ok"}, ${channel.waiting} waiting, ${channel.gaveUp} given up`,
    );
  }
}
