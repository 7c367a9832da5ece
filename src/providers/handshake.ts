import { tokensEqual } from "../crypto/hmac";
import { refusingOversized, rejected } from "./signed";
import type { DeliveryInput, ProviderAdapter, SourceSecret, VerifyResult } from "./types";

/**
 * Challenge handshakes that are not a signed delivery: Meta's GET `hub.challenge`, Dropbox's GET `challenge`,
 * Okta's GET `X-Okta-Verification-Challenge`, Microsoft Graph's `validationToken`, Asana's `X-Hook-Secret`,
 * Notion's `verification_token`, monday.com's `challenge`. Each echoes something back, and an echo is an
 * endpoint saying "yes, send me events": so it is answered only once its own proof checked out (a verify token
 * compared in constant time, a signature, or a secret kept from an earlier proven handshake). An unproven
 * challenge is the same 401 as a bad signature, and writes nothing.
 */

/** A challenge longer than this is not one any sender documents; it is refused rather than echoed. */
export const MAX_CHALLENGE_CHARS = 1024;

/** Spots a handshake: null when the request is an ordinary delivery for the wrapped adapter. */
export type HandshakeStep = (input: DeliveryInput) => VerifyResult | null | Promise<VerifyResult | null>;

/** The adapter with a handshake step in front: a handshake is answered (or refused) before any claim. */
export function withHandshake(
  adapter: ProviderAdapter,
  handshake: HandshakeStep,
  extra: Pick<ProviderAdapter, "methods" | "keptSecrets"> = {},
): ProviderAdapter {
  return {
    ...adapter,
    ...extra,
    async verify(input) {
      const answered = await refusingOversized(
        async () => (await handshake(input)) ?? ({ kind: "not-a-handshake" } as never),
      );
      if ((answered as { kind: string }).kind !== "not-a-handshake") return answered;
      // Only a handshake may be answered to a GET; a GET that is none is refused before any verifier runs.
      if (input.method === "GET") return rejected("missing-signature");
      return adapter.verify(input);
    },
  };
}

/**
 * True when `presented` equals one of `expected`. Every candidate is compared (digests, timingSafeEqual), so the
 * time taken says neither which one matched nor how much of it.
 */
export async function tokenMatches(
  presented: string | null,
  expected: readonly SourceSecret[] | undefined,
): Promise<boolean> {
  if (!presented || !expected || expected.length === 0) return false;
  let matched = false;
  for (const candidate of expected) {
    if (await tokensEqual(presented, candidate.value)) matched = true;
  }
  return matched;
}

/** The challenge as the sender must get it back, or null when it is missing or absurd. */
export function challengeText(value: unknown): string | null {
  return typeof value === "string" && value.length > 0 && value.length <= MAX_CHALLENGE_CHARS ? value : null;
}

/** Echoes a challenge as text; `nosniff` so a browser never renders what an attacker might put in it. */
export function echo(challenge: string, contentType = "text/plain; charset=utf-8"): Response {
  return new Response(challenge, { headers: { "content-type": contentType, "x-content-type-options": "nosniff" } });
}

export function handshake(response: Response, keepSecret?: string): VerifyResult {
  return keepSecret === undefined ? { kind: "handshake", response } : { kind: "handshake", response, keepSecret };
}

/**
 * The `verify_token` query parameter of the URL registered with the sender. Senders whose handshake carries no
 * proof of its own (Dropbox, Microsoft Graph, Asana, Notion, monday.com) are registered with
 * `https://<worker>/webhooks/<source>?verify_token=<token>`, and the token proves the handshake.
 */
export function urlVerifyToken(url: string): string | null {
  const value = new URL(url).searchParams.get("verify_token");
  return value && value.length <= 512 ? value : null;
}
