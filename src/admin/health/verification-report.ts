import { shardsOf } from "../../claims/routing";
import { mergeSecretUse } from "../../claims/secret-use";
import { keptSecretName } from "../../ingest/kept-secret-reads";
import { listKeptSecrets } from "../../ingest/kept-secrets";
import { adapterFor } from "../../providers/registry";
import type { SourceConfig } from "../../sources/config";
import { outcomeCounts } from "../stats/verification-query";
import { type SecretCandidate, type VerificationHealth, verificationHealth } from "./verification-health";

/**
 * Gathers one source's verification health (./verification-health.ts decides it): its secrets in the order the
 * route tries them, the last uses its shards stamped (one RPC per shard, like the duplicate counts), and the window's
 * counts by outcome. For GET /admin/api/sources/:source, the dashboard's source page and `cli check`.
 */

export interface VerificationReport extends VerificationHealth {
  windowMs: number;
  /** Where the counts come from; "not-stored" when there are none (then only the last uses are known). */
  counts: "analytics-engine" | "dev-server-memory" | "not-stored";
  note?: string;
}

/** The secrets a delivery may verify with, first the one the route prefers: listed ones, or the active kept ones. */
async function candidatesOf(env: Env, source: SourceConfig): Promise<SecretCandidate[]> {
  if (adapterFor(source.provider)?.keptSecrets) {
    const kept = await listKeptSecrets(env, source.name);
    return kept
      .filter((secret) => secret.status === "active")
      .map((secret) => ({ name: keptSecretName(secret.fingerprint), kind: "kept", expiresAt: null }));
  }
  return source.secrets.map((ref) => ({ name: ref.name, kind: "listed", expiresAt: ref.expiresAt }));
}

export async function verificationReport(
  env: Env,
  source: SourceConfig,
  windowMs: number,
): Promise<VerificationReport> {
  const [candidates, perShard, counted] = await Promise.all([
    candidatesOf(env, source),
    Promise.all(shardsOf(env, source).map((shard) => shard.secretUseOf(source.name))),
    outcomeCounts(env, source.name, windowMs),
  ]);
  const health = verificationHealth(candidates, mergeSecretUse(perShard), counted.counts, Date.now());
  return {
    windowMs,
    counts: counted.origin,
    ...(counted.origin === "not-stored" && counted.note ? { note: counted.note } : {}),
    ...health,
  };
}
