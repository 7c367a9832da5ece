/**
 * What travels on the work queue: one message per relay batch, naming its receipts and the database they are in.
 * Bodies stay in D1 (a message is billed per 64 KB and caps at 128 KB); a batch of ids lets one message, one queue
 * write, read and delete, carry a whole relay batch.
 */
export interface WorkMessage {
  source: string;
  /**
   * The D1 binding the receipts were found in. A receipt stays in the database it was relayed to, whatever its
   * source's `database` says later, so the consumer reads this one, not the source's current one.
   */
  database: string;
  receiptIds: string[];
  /**
   * Sent by the cron's re-drive: these receipts' earlier message was lost, perhaps with a consumer one of them
   * killed (a local runtime's queue loses its messages when it dies). The consumer runs them as it runs a
   * redelivered message: one at a time, each leased and so counted.
   */
  redriven?: true;
  /**
   * Sent by the relay: on its first delivery this message carries each named receipt's first lease, for as long as
   * the receipt is as the relay left it (src/consumers/lease/relay-grant.ts), so that first attempt writes no lease.
   */
  relayGrant?: true;
  /**
   * Present on a message for further deliveries (migrations/0014): it carries its receipts' deliveries to this route
   * alone, never the receipts' own routes.
   */
  route?: string;
}

/** The batched shape sent before messages named their database: read in the source's database, then looked for elsewhere. */
export interface SourceWorkMessage {
  source: string;
  receiptIds: string[];
}

/** The shape sent before batching (one receipt per message): still accepted, so messages in flight at a deploy finish. */
export interface LegacyWorkMessage {
  receiptId: string;
}

/** The cron's probe (src/consumers/queue/queue-probe.ts): names no receipt, says how far the consumer has come. */
export interface QueueProbe {
  probeSentAt: number;
}

export type QueuedWork = WorkMessage | SourceWorkMessage | LegacyWorkMessage | QueueProbe;

export function receiptIdsOf(message: QueuedWork): string[] {
  if ("receiptIds" in message) return message.receiptIds;
  return "receiptId" in message ? [message.receiptId] : [];
}

export function probeTimeOf(message: QueuedWork): number | null {
  return "probeSentAt" in message && typeof message.probeSentAt === "number" ? message.probeSentAt : null;
}

/** The database a message names, or undefined for the older shapes (which name none). */
export function databaseNamedBy(message: QueuedWork): string | undefined {
  return "database" in message && typeof message.database === "string" ? message.database : undefined;
}

/** Whether the cron's re-drive sent this message (WorkMessage.redriven). */
export function isRedriven(message: QueuedWork): boolean {
  return "redriven" in message && message.redriven === true;
}

/** Whether the relay sent this message with its receipts' first leases granted (WorkMessage.relayGrant). */
export function carriesRelayGrant(message: QueuedWork): boolean {
  return "relayGrant" in message && message.relayGrant === true;
}

/** The route a message's deliveries go to, or undefined for a message of receipts (their own routes). */
export function routeNamedBy(message: QueuedWork): string | undefined {
  return "route" in message && typeof message.route === "string" ? message.route : undefined;
}
