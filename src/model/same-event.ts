import type { Provenance } from "./claims";

interface Copy {
  payloadSha256: string;
  provenance: Provenance | string;
}

/**
 * Whether a second copy of an event key is the same event (a duplicate) rather than a contract violation
 * (quarantine). A reconciled copy is the provider API's rendering of the event, never the bytes it signed and sent,
 * so its hash cannot match the live delivery's: with either side reconciled, the same key means the same event.
 * The claim shard and the relay's second check in D1 both decide with this.
 */
export function isSameEvent(first: Copy, second: Copy): boolean {
  return (
    first.payloadSha256 === second.payloadSha256 ||
    first.provenance === "reconciled" ||
    second.provenance === "reconciled"
  );
}
