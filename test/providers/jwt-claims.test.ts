import { SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import {
  claimAnswer,
  expectAccepted,
  expectRejectedAndNothingWritten,
  nowSeconds,
  type SignedRequest,
  secretValue,
  send,
  uniqueKey,
} from "./support/contract";
import { sha256Hex } from "./support/signers";

/**
 * The JWT senders (monday.com, Netlify), through the real route: monday.com's token must say when it expires (it
 * does not cover the body), an exp must not be past, and when a token was issued that must be now-ish. A token with no `exp` would stay good forever, so a captured one could be replayed
 * at any time; an `iat` far in the past or the future is a token minted for another moment. jose signs each token.
 */

interface Times {
  iat?: number;
  exp?: number;
}

function token(secret: string, claims: Record<string, unknown>, { iat, exp }: Times): Promise<string> {
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT" });
  if (iat !== undefined) jwt.setIssuedAt(iat);
  if (exp !== undefined) jwt.setExpirationTime(exp);
  return jwt.sign(new TextEncoder().encode(secret));
}

const senders: { source: string; expiryRequired: boolean; request(times: Times): Promise<SignedRequest> }[] = [
  {
    source: "pv-monday",
    expiryRequired: true,
    async request(times) {
      const triggerUuid = uniqueKey("mnd_times");
      const body = JSON.stringify({ event: { type: "create_pulse", triggerUuid, pulseId: 1 } });
      return {
        body,
        headers: {
          // Per-request claims, as monday.com's own tokens carry: each token is honoured for one body only.
          authorization: await token(secretValue("monday", "CURRENT"), { shortLivedToken: triggerUuid }, times),
          "content-type": "application/json",
        },
      };
    },
  },
  {
    source: "pv-netlify",
    // Netlify's tokens carry iss and the body's sha256, no exp; the key is the body's hash, so a replay is a duplicate.
    expiryRequired: false,
    async request(times) {
      const body = JSON.stringify({ id: uniqueKey("ntl_times"), state: "ready" });
      return {
        body,
        headers: {
          "x-webhook-signature": await token(
            secretValue("netlify", "CURRENT"),
            { iss: "netlify", sha256: sha256Hex(body) },
            times,
          ),
        },
      };
    },
  },
];

for (const { source, expiryRequired, request } of senders) {
  describe(`${source}: the JWT's exp and iat`, () => {
    if (expiryRequired) {
      it("a token with no exp is refused, and writes nothing", async () => {
        await expectRejectedAndNothingWritten(source, await request({ iat: nowSeconds() }));
        await expectRejectedAndNothingWritten(source, await request({}));
      });
    } else {
      it("a token without exp, as the sender mints them, is accepted; a replay of it is the same event", async () => {
        const signed = await request({});
        const receipt = await expectAccepted(source, signed);
        expect(await claimAnswer(await send(source, signed))).toEqual({ status: "duplicate", receipt });
      });
    }

    it("an exp in the past is refused, and writes nothing", async () => {
      const now = nowSeconds();
      await expectRejectedAndNothingWritten(source, await request({ iat: now - 120, exp: now - 60 }));
    });

    it("an iat in the future beyond a minute's skew, or older than the tolerance, is refused even with a live exp", async () => {
      const now = nowSeconds();
      await expectRejectedAndNothingWritten(source, await request({ iat: now + 600, exp: now + 900 }));
      await expectRejectedAndNothingWritten(source, await request({ iat: now - 3600, exp: now + 300 }));
    });

    it("a fresh token with exp (and iat within the skew) is accepted", async () => {
      const now = nowSeconds();
      await expectAccepted(source, await request({ iat: now + 30, exp: now + 300 }));
      await expectAccepted(source, await request({ exp: now + 300 }));
    });
  });
}
