import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import type { PendingClaim } from "../../src/model/claims";
import { unique } from "../reconcile/support";
import { credit } from "./deliveries";

/**
 * A demo credit as the claim shard would hand it to the relay, minted at `receivedAt`: for tests that relay claims
 * straight through `relayToD1` to place receipts at chosen times (a partition ring's periods) without waiting for a clock.
 * The payload hash is unique unless given, so no two such claims are the same delivery.
 */
export function creditClaimAt(
  source: string,
  receivedAt: number,
  eventKey: string,
  payloadSha256: string = unique().padEnd(64, "0"),
): PendingClaim {
  return {
    source,
    eventKey,
    eventType: "account.credited",
    subjectId: null,
    version: null,
    occurredAt: null,
    claimKey: eventKey,
    receiptId: ulid(receivedAt),
    payloadSha256,
    body: utf8Bytes(JSON.stringify(credit(`acct_${eventKey}`, 1))).buffer as ArrayBuffer,
    keptHeaders: null,
    receivedAt,
    provenance: "live",
  };
}
