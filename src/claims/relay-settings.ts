import { isLocalDevelopment } from "../lib/local-development";
import { secretValue } from "../lib/secrets";

/**
 * The two relay knobs a deployment's env may carry, read strictly. Both exist for local runs: the tests shorten
 * the delay, the bench holds the relay back to measure the acknowledgement path alone. Deployed, a held-back or
 * hour-long relay would keep every accepted event in the shards, unprocessed, with nothing saying why; so outside
 * a local run (`LOCAL_DEVELOPMENT="true"` in .dev.vars, src/lib/local-development.ts) RELAY_HELD_BACK is refused
 * and RELAY_DELAY_MS is bounded, and any value not honoured as written is named by GET /health
 * ("relay-settings-refused") and explained by GET /admin/api/health. A refused value never holds the relay.
 */

/**
 * How long a busy shard gathers claims before relaying them, unless a full batch is waiting first; an idle one relays
 * a claim at once (./relay-timing.ts).
 */
export const DEFAULT_RELAY_DELAY_MS = 3000;
/**
 * The longest relay delay a deployed Worker takes. A receipt relayed more than LATE_RELAY_MS (10 s,
 * src/admin/receipts/receipt-cursor.ts) after it arrived enters the late-relay index, a billed row write; a delay near that
 * would put every receipt there, so the bound leaves the relay's own write half of it.
 */
export const MAX_RELAY_DELAY_MS = 5000;
/** The longest a local run may hold the relay (the bench uses an hour). */
export const MAX_LOCAL_RELAY_DELAY_MS = 86_400_000;

export interface RelaySettings {
  delayMs: number;
  /** A full batch waits out the delay too, instead of going at once (the bench's held-back receiver). */
  fullBatchWaits: boolean;
  /** One sentence per value not honoured as written: what was refused and what is used instead. */
  problems: string[];
}

const shown = (value: string) => JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);

export function relaySettings(env: object): RelaySettings {
  const local = isLocalDevelopment(env);
  const problems: string[] = [];

  let fullBatchWaits = false;
  const heldBack = secretValue(env, "RELAY_HELD_BACK");
  if (heldBack === "true" || heldBack === "1") {
    if (local) fullBatchWaits = true;
    else
      problems.push(
        'RELAY_HELD_BACK is for local runs only (LOCAL_DEVELOPMENT="true" in .dev.vars); it is ignored, and full batches relay at once.',
      );
  } else if (heldBack !== null && heldBack !== "false" && heldBack !== "0") {
    problems.push(
      `RELAY_HELD_BACK is ${shown(heldBack)}: it takes "true" or "false"; it is ignored, and full batches relay at once.`,
    );
  }

  let delayMs = DEFAULT_RELAY_DELAY_MS;
  const delay = secretValue(env, "RELAY_DELAY_MS");
  const bound = local ? MAX_LOCAL_RELAY_DELAY_MS : MAX_RELAY_DELAY_MS;
  if (delay !== null) {
    const configured = /^\d{1,10}$/.test(delay) ? Number(delay) : Number.NaN;
    if (Number.isNaN(configured)) {
      problems.push(
        `RELAY_DELAY_MS is ${shown(delay)}: it takes whole milliseconds; the default of ${DEFAULT_RELAY_DELAY_MS} ms is used.`,
      );
    } else if (configured > bound) {
      delayMs = bound;
      problems.push(
        `RELAY_DELAY_MS is ${configured}, over the ${bound} ms ${local ? "a local run allows" : 'a deployed Worker allows (longer only with LOCAL_DEVELOPMENT="true")'}; ${bound} ms is used.`,
      );
    } else {
      delayMs = configured;
    }
  }
  return { delayMs, fullBatchWaits, problems };
}
