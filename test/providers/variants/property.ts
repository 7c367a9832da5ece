import { env } from "cloudflare:workers";
import fc from "fast-check";
import { expect } from "vitest";
import { shardsOf } from "../../../src/claims/routing";
import { send, uniqueKey } from "../support/contract";

/**
 * The property every adapter must hold (docs/providers.md, "Dedupe keys and what each signature covers"): a variant
 * of a captured delivery that keeps every byte its signature covers — other unsigned headers, the body re-encoded
 * where the body is not what is signed, a batch's items reordered, dropped or mixed with another batch's — is
 * refused, a `duplicate`, or quarantined; it never becomes a second receipt. Checked through the real route: each
 * run captures fresh deliveries, sends each variant, and when any was answered `accepted`, relays every claim the
 * source's shards hold and counts the receipts D1 holds for the captured events and those variants together: one
 * per captured event (a delivery is one event, or one per item for Adyen).
 */

export interface Delivery {
  /** Defaults to https://receiver.test/webhooks/<source>. */
  url?: string;
  body: string;
  headers: Record<string, string>;
}

/** One way to change captured deliveries without touching what they sign; `apply` gets every delivery the run captured. */
export interface Variant {
  label: string;
  apply(captured: readonly Delivery[]): Delivery;
  [fc.toStringMethod](): string;
}

export interface Sender {
  /** The `provider = "…"` name this sender checks (an alias names its own). */
  provider: string;
  source: string;
  /** Which kind of delivery, where a sender sends more than one (form or JSON). */
  kind?: string;
  /** A fresh genuine delivery; `marker` makes it unlike every other. */
  deliver(marker: string): Promise<Delivery> | Delivery;
  /** The variants one run may send; each run sends one to four of them. */
  variants: fc.Arbitrary<Variant>;
  /** How many genuine deliveries a run captures before its variants (two, for senders whose batches can be mixed). */
  captured?: number;
  /** Runs once before the first delivery (a kept secret's handshake, a published key). */
  setup?(): Promise<void>;
}

export function variant(label: string, apply: (captured: readonly Delivery[]) => Delivery): Variant {
  return { label, apply, [fc.toStringMethod]: () => label };
}

/** A variant of the first captured delivery. */
export function onFirst(label: string, change: (delivery: Delivery) => Delivery): Variant {
  return variant(label, (captured) => change(captured[0]!));
}

/**
 * Several changes at once, applied in turn to the first delivery: for a sender whose signature pins the bytes (or
 * whose key it signs), a change of the unsigned key together with a re-encoding is still no new event.
 */
export function composed(atoms: fc.Arbitrary<Variant>, most = 3): fc.Arbitrary<Variant> {
  return fc
    .array(atoms, { minLength: 1, maxLength: most })
    .map((chain) =>
      variant(chain.map((atom) => atom.label).join(" + "), (captured) =>
        chain.reduce((delivery, atom) => atom.apply([delivery, ...captured.slice(1)]), captured[0]!),
      ),
    );
}

interface Answer {
  text: string;
  /** The receipts of the events answered `accepted`: claimed, and each a second event unless its relay is refused. */
  accepted: string[];
}

/** What the route answered for each event of a delivery (one, or several for Adyen's items), in their order. */
async function answerOf(response: Response): Promise<Answer> {
  if (response.status < 200 || response.status >= 300) {
    await response.body?.cancel();
    return { text: String(response.status), accepted: [] };
  }
  let claims: { status: string; receipt: string }[];
  const receipts = response.headers.get("x-webhook-receipt");
  if (receipts !== null) {
    // A sender that reads the answer gets its own shape; the claims ride in headers (src/ingest/acknowledge.ts).
    const statuses = (response.headers.get("x-webhook-disposition") ?? "").split(", ");
    claims = receipts.split(", ").map((receipt, index) => ({ status: statuses[index] ?? "", receipt }));
    await response.body?.cancel();
  } else {
    const answer = await response
      .json<{ status?: string; receipt?: string; events?: typeof claims }>()
      .catch(() => null);
    claims = answer?.events ?? (answer?.status ? [{ status: answer.status, receipt: answer.receipt ?? "" }] : []);
  }
  const statuses = claims.map((claim) => claim.status).join(", ") || "(nothing claimed)";
  return {
    text: `${response.status} ${statuses}`,
    accepted: claims.filter((claim) => claim.status === "accepted").map((claim) => claim.receipt),
  };
}

/**
 * How many of these receipts D1 holds once every claim the source's shards hold is relayed: of two accepted claims
 * of one key (an unsigned key is claimed under the payload hash, so two copies may sit in two shards), the one
 * relayed second is refused by D1's unique key and quarantined (`payload-mismatch`), never a receipt.
 */
async function receiptsOnceRelayed(source: string, receiptIds: readonly string[]): Promise<number> {
  await Promise.all(
    shardsOf(env, source).map(async (shard) => {
      for (let round = 0; round < 10 && (await shard.relay()).remaining > 0; round++);
    }),
  );
  const row = await env.DB.prepare(
    `SELECT COUNT(*) AS count FROM receipts WHERE source = ? AND id IN (${receiptIds.map(() => "?").join(", ")})`,
  )
    .bind(source, ...receiptIds)
    .first<{ count: number }>();
  return row!.count;
}

/**
 * Runs per sender: each captures one or two deliveries and sends one to four variants through the route, and relays
 * the source's shards only when a variant was answered `accepted` (no other answer claims anything).
 */
export const RUNS = 5;

export async function holdsForEveryVariant(sender: Sender, runs = RUNS): Promise<void> {
  await sender.setup?.();
  await fc.assert(
    fc.asyncProperty(fc.array(sender.variants, { minLength: 1, maxLength: 4 }), async (variants) => {
      const captured: Delivery[] = [];
      const originals: string[] = [];
      for (let index = 0; index < (sender.captured ?? 1); index++) {
        const delivery = await sender.deliver(uniqueKey(sender.provider.replace(/-/g, "_")));
        const answer = await answerOf(await send(sender.source, delivery));
        expect(answer.text, `the genuine ${sender.provider} delivery`).toMatch(/^20[024] accepted(, accepted)*$/);
        captured.push(delivery);
        originals.push(...answer.accepted);
      }
      // All at once, as a replayer would send them: copies that race meet in the shards' transactions or at relay.
      const answers = await Promise.all(
        variants.map(async (each) => answerOf(await send(sender.source, each.apply(captured)))),
      );
      const described = variants.map((each, index) => `${each.label}: ${answers[index]!.text}`);
      for (const line of described) expect(line, "a variant is answered, never a server error").not.toMatch(/: 5\d\d$/);
      const accepted = answers.flatMap((answer) => answer.accepted);
      if (accepted.length === 0) return;
      // Whichever copy of a key relays first is the receipt, the other quarantined: one receipt per captured event.
      const receipts = await receiptsOnceRelayed(sender.source, [...originals, ...accepted]);
      expect(receipts, `receipts for the captured events and their variants:\n${described.join("\n")}`).toBe(
        originals.length,
      );
    }),
    { numRuns: runs, endOnFailure: true },
  );
}
