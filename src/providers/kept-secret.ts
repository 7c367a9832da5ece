import { type HandshakeStep, handshake, tokenMatches, urlVerifyToken, withHandshake } from "./handshake";
import { rejected } from "./signed";
import type { ProviderAdapter, VerifyResult } from "./types";

/**
 * Senders that hand their signing secret over in a handshake (Asana, Notion). The URL registered with the sender
 * holds `?verify_token=<token>`, and the source lists that token's Worker secret in `secrets`: it proves the
 * handshake, whose secret the route then keeps (D1 `handshake_secrets`). Deliveries verify against the kept
 * secrets only; the listed token never verifies a delivery.
 */
export function keptSecretAdapter(
  delivery: ProviderAdapter,
  /** The secret handed over, when this request is the handshake; null for an ordinary delivery. */
  handedOver: (input: Parameters<HandshakeStep>[0]) => string | null | undefined,
  answer: (secret: string) => Response,
): ProviderAdapter {
  const verifiesWithKeptSecrets: ProviderAdapter = {
    ...delivery,
    verify: (input) => delivery.verify({ ...input, secrets: input.keptSecrets ?? [] }),
  };
  return withHandshake(
    verifiesWithKeptSecrets,
    async (input): Promise<VerifyResult | null> => {
      const secret = handedOver(input);
      if (secret === null) return null;
      if (!secret || secret.length > 512) return rejected("malformed-payload");
      if (!(await tokenMatches(urlVerifyToken(input.url), input.secrets))) return rejected("signature-mismatch");
      return handshake(answer(secret), secret);
    },
    { keptSecrets: true },
  );
}
