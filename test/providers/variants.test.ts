import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import { knownProviderNames } from "../../src/providers/registry";
import { keyStandinOrigin } from "./support/key-standin";
import { holdsForEveryVariant, type Sender } from "./variants/property";
import { adyenSender } from "./variants/senders-adyen";
import { bodySigned } from "./variants/senders-body";
import { keySigned } from "./variants/senders-keys";
import { presetSenders } from "./variants/senders-presets";
import { snsSender } from "./variants/senders-sns";
import { subsetSigned } from "./variants/senders-subset";
import { bodySignedMore } from "./variants/senders-url-jwt";

/**
 * The property test behind docs/providers.md's "Dedupe keys and what each signature covers": for every provider
 * name the receiver knows, signature-preserving variants of captured deliveries (test/providers/variants/) never
 * become a second receipt. Each sender's variants say what its signature leaves out.
 */

const senders: readonly Sender[] = [
  ...bodySigned,
  ...bodySignedMore,
  ...keySigned,
  ...subsetSigned,
  ...presetSenders,
  adyenSender(),
  snsSender(),
];

beforeAll(() => redirectKeyFetchesForTests(env, keyStandinOrigin()));
afterAll(() => redirectKeyFetchesForTests(env, null));

describe("every adapter: a variant of a captured delivery that keeps what is signed is never a second event", () => {
  it("has a sender for every provider name, aliases included", () => {
    expect([...new Set(senders.map((sender) => sender.provider))].sort()).toEqual([...knownProviderNames()].sort());
  });

  for (const sender of senders) {
    it(`${sender.provider} (${sender.source}${sender.kind ? `, ${sender.kind}` : ""})`, () =>
      holdsForEveryVariant(sender));
  }
});
