import { sql } from "drizzle-orm";
import { database } from "../db/client";
import { parseDuration } from "../lib/duration";
import { secretValue } from "../lib/secrets";
import { ulidFloor } from "../lib/ulid";

/**
 * The operator audit log's own retention (docs/operating.md, "Access, roles and the audit log"): rows older than
 * OPERATOR_ACTIONS_RETENTION (a duration, "90d" by default) go, by their ULID id (minted at the action's time), so
 * the delete reads the primary key and nothing else. Operator actions are rare: one bounded delete a run keeps up,
 * and a backlog (a shortened setting) goes on at the next run.
 */

export const DEFAULT_OPERATOR_ACTIONS_RETENTION = "90d";
/** Rows deleted per run at most. */
export const OPERATOR_ACTIONS_DELETE_BATCH = 1000;

export function operatorActionsRetentionMs(env: object): number {
  const setting = secretValue(env, "OPERATOR_ACTIONS_RETENTION") ?? DEFAULT_OPERATOR_ACTIONS_RETENTION;
  const retentionMs = parseDuration(setting);
  if (retentionMs === null || retentionMs <= 0)
    throw new Error(
      `OPERATOR_ACTIONS_RETENTION must be a duration such as "90d" or "2160h", not ${JSON.stringify(setting)}; nothing was deleted.`,
    );
  return retentionMs;
}

/** Deletes the audit log's rows older than its retention; returns how many went. */
export async function forgetOldOperatorActions(env: Env, now: number): Promise<number> {
  const cutoff = ulidFloor(now - operatorActionsRetentionMs(env));
  const result = await database(env).run(
    sql`DELETE FROM operator_actions WHERE id IN (SELECT id FROM operator_actions WHERE id < ${cutoff} LIMIT ${OPERATOR_ACTIONS_DELETE_BATCH})`,
  );
  return result.meta.changes;
}
