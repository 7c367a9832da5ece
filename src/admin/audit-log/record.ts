import { database } from "../../db/client";
import { operatorActions } from "../../db/schema";
import { logError } from "../../lib/log";
import { ulid } from "../../lib/ulid";
import type { Actor } from "../guards/actor";

/**
 * Writing the operator audit log (docs/operating.md, "Access, roles and the audit log"). Every operator action goes
 * through here once it is decided: allowed (after it ran, with how many things it affected) or refused for the
 * caller's role (../access/require-role.ts, before anything ran).
 */

export const OPERATOR_ACTIONS = [
  "replay",
  "bulk-replay",
  "dismiss",
  "restore",
  "pause",
  "resume",
  "acknowledge",
  "resolve",
  "approve",
  "revoke",
  "listen",
] as const;
export type OperatorAction = (typeof OPERATOR_ACTIONS)[number];

export interface OperatorActionRecord {
  actor: Actor;
  action: OperatorAction;
  /** What it acted on, in words: a receipt id, "3 receipts", "source stripe route ledger", a filter. */
  target: string;
  /** How many things it changed: receipts replayed, dead letters dismissed, held deliveries resumed; 0 when refused. */
  affected: number;
  outcome: "allowed" | "refused";
}

/**
 * Appends one row. A failed write is logged, not thrown: an allowed action has already happened by now, and
 * answering it with a 500 would tell the operator it had not. That log line carries the row's fields, so the
 * Worker's logs still hold the record.
 */
export async function recordOperatorAction(env: Env, record: OperatorActionRecord, now = Date.now()): Promise<void> {
  const { actor, ...rest } = record;
  const row = { actionId: ulid(now), at: now, actor: actor.name, role: actor.role, via: actor.via, ...rest };
  try {
    await database(env).insert(operatorActions).values(row);
  } catch (error) {
    const { actionId: _actionId, ...fields } = row;
    logError("admin.operator_action_not_recorded", error, fields);
  }
}
