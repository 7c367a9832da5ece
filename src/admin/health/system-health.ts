import { relaySettings } from "../../claims/relay-settings";
import { healthAnswer } from "../../monitor/health-answer";
import { systemMonitor } from "../../monitor/report";
import { shardEpochStatus } from "../../reconcile/shard-epoch-status";
import { loadSources, sourcesHealth } from "../../sources/registry";
import { sourcesMissingSecrets, sourcesWithExpiredSecrets } from "../../sources/secrets-set";
import { configuredSources, type StorageSizes, storageSizes } from "./storage-sizes";

/**
 * GET /admin/api/health: what GET /health says, with the details behind each reason — every incident the system
 * monitor holds (open, or resolved and not yet recorded in D1), each with its message, who reports it and whether
 * D1 has it yet — and how full every receipt database and every claim shard are. Answers while D1 is down (a
 * database that does not answer has a null size).
 */
/**
 * `onlySource` limits the shard sizes to that source's shards (one RPC per shard; every source's when undefined);
 * null asks no shard at all (`storage.shards` is null), for pages that cannot afford an RPC per shard per view.
 */
export async function systemHealth(env: Env, onlySource?: string | null) {
  const sources = sourcesHealth(env);
  const invalidSources = sources.unreadable ? ["*"] : Object.keys(sources.invalid);
  let monitorError: string | null = null;
  const alerts = await systemMonitor(env)
    .list()
    .catch((error: unknown) => {
      monitorError = error instanceof Error ? error.message.slice(0, 200) : String(error);
      return [];
    });
  const open = alerts.filter((alert) => alert.state === "open");
  const now = Date.now();
  const missingSecrets = sourcesMissingSecrets(env, now);
  const expiredSecrets = sourcesWithExpiredSecrets(env, now);
  const relay = relaySettings(env);
  const answer = healthAnswer(
    invalidSources,
    monitorError === null ? open.map((alert) => alert.kind) : ["monitor-unreachable"],
    {
      missingSecrets: [...missingSecrets.keys()],
      expiredSecrets: [...expiredSecrets.keys()],
      relaySettingsRefused: relay.problems.length > 0,
    },
  );
  let storage: StorageSizes | null = null;
  try {
    const shardsOfSources =
      onlySource === null
        ? null
        : onlySource === undefined
          ? configuredSources(env)
          : configuredSources(env).filter((name) => name === onlySource);
    storage = await storageSizes(env, shardsOfSources);
  } catch {
    // A shard that does not answer must not hide the alerts; the sizes come back with it.
  }
  // A shard epoch (CLAIM_SHARD_PREVIOUS): how its handover stands, and when the setting can go.
  const shardEpoch = await shardEpochStatus(env, sources.unreadable ? [] : [...loadSources(env).values()], now);
  return {
    ...answer,
    configProblems: sources.unreadable ? { "*": sources.unreadable } : sources.invalid,
    /** Per source that cannot verify a delivery, the secret names it lacks (`wrangler secret put <name>`). */
    missingSecrets: Object.fromEntries(missingSecrets),
    /** Per source every signing secret of which has expired, those secret names: list a fresh one and deploy. */
    expiredSecrets: Object.fromEntries(expiredSecrets),
    /** Why RELAY_HELD_BACK or RELAY_DELAY_MS is not honoured as written, and what is used instead. */
    relaySettings: relay.problems,
    shardEpoch,
    systemAlerts: alerts,
    monitorError,
    storage,
  };
}
