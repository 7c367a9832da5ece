import { apiError } from "../../lib/errors";
import type { Issue } from "../../monitor/issues/types";
import { systemMonitor } from "../../monitor/report";

/**
 * The operator's side of issues (src/monitor/issues/), shared by the admin API and the dashboard's forms: list,
 * acknowledge with a note, resolve by hand. The system monitor holds them; this checks the input and turns its
 * refusals into the API's errors.
 */

export const MAX_ISSUE_NOTE_LENGTH = 500;

/** A note as sent: required to acknowledge, optional to resolve; trimmed, at most MAX_ISSUE_NOTE_LENGTH characters. */
export function issueNote(value: unknown, required: boolean): string | null {
  const usage = `"note" is ${required ? "required: say what is being done about it" : "optional"} (text, at most ${MAX_ISSUE_NOTE_LENGTH} characters).`;
  if (value === undefined || value === null || value === "") {
    if (required) throw apiError(400, "note_required", usage);
    return null;
  }
  if (typeof value !== "string") throw apiError(400, "invalid_note", usage);
  const note = value.trim();
  if (note.length === 0 && required) throw apiError(400, "note_required", usage);
  if (note.length > MAX_ISSUE_NOTE_LENGTH) throw apiError(400, "invalid_note", usage);
  return note.length === 0 ? null : note;
}

export async function listIssues(env: Env, options: { all: boolean }) {
  return systemMonitor(env).issues(options);
}

export async function changeIssue(
  env: Env,
  issueKey: string,
  change: "acknowledge" | "resolve",
  note: string | null,
): Promise<Issue> {
  const monitor = systemMonitor(env);
  const now = Date.now();
  const outcome =
    change === "acknowledge"
      ? await monitor.acknowledgeIssue(issueKey, note ?? "", now)
      : await monitor.resolveIssue(issueKey, note, now);
  if (!outcome.ok)
    throw apiError(outcome.status, outcome.status === 404 ? "issue_not_found" : "issue_not_open", outcome.error);
  return outcome.issue;
}
