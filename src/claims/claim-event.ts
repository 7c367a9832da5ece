import { sha256Hex } from "../crypto/digest";
import { type ClaimRequest, type ClaimResult, claimKeyOf, type Provenance } from "../model/claims";
import type { EventIdentity } from "../providers/types";
import type { SourceConfig } from "../sources/config";
import { previousOwnerOf } from "./epoch-config";
import { shardFor } from "./routing";

export interface ClaimInput {
  source: SourceConfig;
  identity: EventIdentity;
  rawBody: Uint8Array;
  keptHeaders: Record<string, string>;
  receivedAt: number;
  provenance: Provenance;
  /** The secret whose use the shard stamps (src/claims/secret-use.ts); only when the source had several. */
  verifiedBy?: string;
}

/**
 * Claims a verified event in the shard that owns its claim key (the event key, or the digest of the signed content
 * when the signature does not cover the key: claimKeyOf). The live route, provider catch-up and tests all enter here, so
 * every path to a receipt shares one arbiter, across a change of shard count or placement too.
 */
export async function claimEvent(env: Env, input: ClaimInput): Promise<ClaimResult> {
  const payloadSha256 = await sha256Hex(input.rawBody);
  const { identity } = input;
  const request: ClaimRequest = {
    source: input.source.name,
    eventKey: identity.eventKey,
    eventKeySigned: identity.eventKeySigned,
    ...(identity.signedContent ? { signedContent: identity.signedContent } : {}),
    payloadSha256,
    eventType: identity.eventType,
    subjectId: identity.subjectId,
    version: identity.version,
    occurredAt: identity.occurredAt,
    body: input.rawBody,
    keptHeaders: JSON.stringify({ ...input.keptHeaders, ...identity.annotations }),
    receivedAt: input.receivedAt,
    provenance: input.provenance,
    ...(input.verifiedBy !== undefined ? { verifiedBy: input.verifiedBy } : {}),
  };
  const claimKey = claimKeyOf(request);
  // During a shard epoch the new owner consults the key's previous owner (./epoch-config.ts): named here, from
  // config alone, so the acknowledgement path reads nothing more than it did.
  const previous = previousOwnerOf(env, input.source, claimKey);
  return shardFor(env, input.source, claimKey).claim(request, previous ?? undefined);
}

export function pickHeaders(headers: Headers, names: readonly string[]): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of names) {
    const value = headers.get(name);
    if (value !== null) kept[name] = value.slice(0, 512);
  }
  return kept;
}
