import { and, desc, eq, sql } from "drizzle-orm";
import { batchByName } from "../db/batch";
import { database } from "../db/client";
import { keptSecretInstalls, keptSecrets } from "../db/schema";
import { forgetCachedKeptSecrets, secretFingerprint } from "./kept-secret-reads";

/**
 * Kept secrets: the ones senders hand over in a handshake (Asana's X-Hook-Secret, Notion's verification_token),
 * kept in D1's `handshake_secrets` (the table's older name; renaming it would need a migration). Only sources whose
 * adapter has `keptSecrets` read it, so every other source's acknowledgement path still touches no D1; deliveries
 * read the active ones through ./kept-secret-reads.ts, which caches them.
 *
 * The verify token that proves a handshake sits in the registered URL, so in logs: it is enough for a source's
 * first secret, once (the real sender's first handshake needs no operator step), never for replacing or adding to
 * one, nor for installing one again after an operator revoked them all (`kept_secret_installs` remembers the first).
 * Any other secret is kept "pending" and verifies nothing until an operator approves it; revoking removes one
 * (src/admin/api/kept-secrets.ts). At most PENDING_PER_SOURCE wait: past that a new one is refused, never one
 * already waiting dropped, so a flood cannot push the genuine one out. Each records its handshake's client
 * address and user agent so an operator can tell them apart.
 */

export type KeptSecretStatus = "active" | "pending";

/** What the admin API shows of a kept secret: never its value. */
export interface KeptSecretListing {
  fingerprint: string;
  status: KeptSecretStatus;
  /** The last time it was handed over. */
  receivedAt: number;
  /** CF-Connecting-IP of that handshake; null where there is none (not behind Cloudflare) or it predates them. */
  clientAddress: string | null;
  userAgent: string | null;
}

/** Pending ones kept per source: a leaked verify token can neither grow the table nor push a waiting one out. */
export const PENDING_PER_SOURCE = 8;
/** What is kept of a handshake's client: enough to tell clients apart, bounded whatever a caller sends. */
const MAX_CLIENT_ADDRESS_CHARS = 64;
const MAX_USER_AGENT_CHARS = 256;

/** Who handed a secret over, as the handshake's request says. */
export interface HandshakeClient {
  clientAddress: string | null;
  userAgent: string | null;
}

export function handshakeClient(headers: Headers): HandshakeClient {
  return {
    clientAddress: headers.get("cf-connecting-ip")?.slice(0, MAX_CLIENT_ADDRESS_CHARS) ?? null,
    userAgent: headers.get("user-agent")?.slice(0, MAX_USER_AGENT_CHARS) ?? null,
  };
}

/**
 * Keeps a secret handed over in a proven handshake, in one batch (one transaction) so two first handshakes racing
 * cannot both become active: active only when the source has never had its first install and has no other active
 * secret, else pending. A secret already kept keeps its status and has its time and client refreshed. A new
 * pending one is refused while PENDING_PER_SOURCE already wait. Answers the status it now has, or "refused".
 */
export async function keepSecret(
  env: Pick<Env, "DB">,
  source: string,
  secret: string,
  now: number,
  client: HandshakeClient,
): Promise<KeptSecretStatus | "refused"> {
  const db = database(env);
  const installed = sql`EXISTS (SELECT 1 FROM ${keptSecretInstalls} WHERE ${keptSecretInstalls.source} = ${source})`;
  const anotherIsActive = sql`EXISTS (SELECT 1 FROM ${keptSecrets} WHERE ${keptSecrets.source} = ${source} AND ${keptSecrets.status} = 'active' AND ${keptSecrets.secret} <> ${secret})`;
  const alreadyKept = sql`EXISTS (SELECT 1 FROM ${keptSecrets} WHERE ${keptSecrets.source} = ${source} AND ${keptSecrets.secret} = ${secret})`;
  const pendingCount = sql`(SELECT count(*) FROM ${keptSecrets} WHERE ${keptSecrets.source} = ${source} AND ${keptSecrets.status} = 'pending')`;
  // INSERT … SELECT … WHERE: the row is written only when the secret is kept already (a refresh) or has room.
  const candidate = db
    .select({
      source: sql<string>`${source}`.as("source"),
      secret: sql<string>`${secret}`.as("secret"),
      receivedAt: sql<number>`${now}`.as("received_at"),
      status: sql<KeptSecretStatus>`CASE WHEN ${installed} OR ${anotherIsActive} THEN 'pending' ELSE 'active' END`.as(
        "status",
      ),
      clientAddress: sql<string | null>`${client.clientAddress}`.as("client_address"),
      userAgent: sql<string | null>`${client.userAgent}`.as("user_agent"),
    })
    .from(sql`(SELECT 1)`)
    .where(sql`${alreadyKept} OR ${pendingCount} < ${PENDING_PER_SOURCE}`);
  const { kept } = await batchByName(db, {
    kept: db
      .insert(keptSecrets)
      .select(candidate)
      .onConflictDoUpdate({
        target: [keptSecrets.source, keptSecrets.secret],
        set: {
          receivedAt: sql`max(${keptSecrets.receivedAt}, excluded.received_at)`,
          clientAddress: sql`excluded.client_address`,
          userAgent: sql`excluded.user_agent`,
        },
      })
      .returning({ status: keptSecrets.status }),
    installed: db.insert(keptSecretInstalls).values({ source, installedAt: now }).onConflictDoNothing(),
  });
  forgetCachedKeptSecrets(source);
  return kept[0]?.status ?? "refused";
}

async function keptRows(env: Pick<Env, "DB">, source: string) {
  const rows = await database(env)
    .select({
      secret: keptSecrets.secret,
      status: keptSecrets.status,
      receivedAt: keptSecrets.receivedAt,
      clientAddress: keptSecrets.clientAddress,
      userAgent: keptSecrets.userAgent,
    })
    .from(keptSecrets)
    .where(eq(keptSecrets.source, source))
    .orderBy(desc(keptSecrets.receivedAt));
  return Promise.all(rows.map(async (row) => ({ ...row, fingerprint: await secretFingerprint(row.secret) })));
}

const listing = ({
  fingerprint,
  status,
  receivedAt,
  clientAddress,
  userAgent,
}: KeptSecretListing): KeptSecretListing => ({
  fingerprint,
  status,
  receivedAt,
  clientAddress,
  userAgent,
});

/** Every kept secret of a source, newest first, by fingerprint. */
export async function listKeptSecrets(env: Pick<Env, "DB">, source: string): Promise<KeptSecretListing[]> {
  return (await keptRows(env, source)).map(listing);
}

/**
 * Approves (makes active) or revokes (deletes) the kept secret with this fingerprint; null when the source has none
 * with it. Other isolates' caches may still try a revoked secret for up to a minute (./kept-secret-reads.ts).
 */
export async function changeKeptSecret(
  env: Pick<Env, "DB">,
  source: string,
  fingerprint: string,
  change: "approve" | "revoke",
): Promise<KeptSecretListing | null> {
  const row = (await keptRows(env, source)).find((candidate) => candidate.fingerprint === fingerprint);
  if (!row) return null;
  const which = and(eq(keptSecrets.source, source), eq(keptSecrets.secret, row.secret));
  const db = database(env);
  if (change === "approve") await db.update(keptSecrets).set({ status: "active" }).where(which);
  else await db.delete(keptSecrets).where(which);
  forgetCachedKeptSecrets(source);
  return listing({ ...row, status: change === "approve" ? "active" : row.status });
}
