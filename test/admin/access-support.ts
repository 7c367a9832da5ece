import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { inject } from "vitest";
import { database } from "../../src/db/client";
import { operatorActions, receipts } from "../../src/db/schema";

/**
 * Cloudflare Access for tests: a team whose certificates the key stand-in (test/setup/global/key-standin.ts) serves
 * at the path Access publishes them on, and tokens signed with its key the way Access signs them (RS256, the team
 * as issuer, the application's AUD tag as audience). The Worker fetches the certificates itself, from the URL it
 * derives from ACCESS_TEAM_DOMAIN, redirected to the stand-in by `redirectKeyFetchesForTests`.
 */

export const TEAM_DOMAIN = "receiver-test.cloudflareaccess.com";
export const TEAM_ORIGIN = `https://${TEAM_DOMAIN}`;
export const AUDIENCE = "3f6a1c0e9b8d7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f";
export const KEY_ID = "receiver-test-key";

export interface TeamKeys {
  sign: (claims: JWTPayload, options?: { audience?: string; issuer?: string; expiresIn?: string }) => Promise<string>;
}

export async function keyPair() {
  return generateKeyPair("RS256", { extractable: true });
}

/** Publishes the team's key set on the stand-in and returns a signer with its private key. */
export async function publishTeamKeys(): Promise<TeamKeys & { signWithOtherKey: TeamKeys["sign"] }> {
  const { publicKey, privateKey } = await keyPair();
  const other = await keyPair();
  const jwk = { ...(await exportJWK(publicKey)), kid: KEY_ID, alg: "RS256", use: "sig" };
  const published = await fetch(`${inject("keyStandinOrigin")}/__serve/cdn-cgi/access/certs`, {
    method: "PUT",
    body: JSON.stringify({ keys: [jwk] }),
  });
  if (published.status !== 204) throw new Error(`the key stand-in refused the key set: ${published.status}`);
  const signer =
    (key: CryptoKey): TeamKeys["sign"] =>
    (claims, options = {}) =>
      new SignJWT({ type: "app", ...claims })
        .setProtectedHeader({ alg: "RS256", kid: KEY_ID })
        .setIssuer(options.issuer ?? TEAM_ORIGIN)
        .setAudience(options.audience ?? AUDIENCE)
        .setIssuedAt()
        .setExpirationTime(options.expiresIn ?? "5m")
        .sign(key);
  return { sign: signer(privateKey), signWithOtherKey: signer(other.privateKey) };
}

/** The Worker's env with Access on, these roles. */
export function accessEnv(roles: unknown, extra: Record<string, unknown> = {}): Env {
  return { ...env, ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, ACCESS_AUD: AUDIENCE, ACCESS_ROLES: roles, ...extra } as Env;
}

/** The audit log's rows for one actor, oldest first. */
export async function actionsBy(actor: string) {
  const rows = await database(env).select().from(operatorActions).where(eq(operatorActions.actor, actor));
  return rows.sort((a, b) => a.actionId.localeCompare(b.actionId));
}

/** What a refused action must have left alone: the receipt's status and replay count. */
export async function receiptState(receiptId: string) {
  const [row] = await database(env)
    .select({ status: receipts.status, replayCount: receipts.replayCount })
    .from(receipts)
    .where(eq(receipts.receiptId, receiptId));
  return row;
}
