import { type Context, Hono } from "hono";
import { changeKeptSecret, listKeptSecrets } from "../../ingest/kept-secrets";
import { apiError } from "../../lib/errors";
import { adapterFor } from "../../providers/registry";
import { lookupSource } from "../../sources/registry";
import { recordAllowed, requireRole } from "../access/require-role";
import type { AdminEnv } from "../guards/auth";

/**
 * /admin/api/sources/:source/kept-secrets — the secrets Asana and Notion handed over in a handshake
 * (src/ingest/kept-secrets.ts), by fingerprint, never by value. A source's first one is active at once (once ever);
 * one handed over while another is active waits as "pending" until approved here. Revoke removes either.
 * Mounted behind the sign-in by ./index.ts; approving and revoking change what verifies deliveries, so they need the
 * admin role, and each is written to the audit log.
 */
export const keptSecretsApi = new Hono<AdminEnv>();

const FINGERPRINT = /^[0-9a-f]{16}$/;

/** The source, when it is configured and its sender hands over a secret to keep; else the 4xx saying which. */
function keptSecretSource(env: Env, source: string): string {
  const lookup = lookupSource(env, source);
  if (lookup.kind === "unknown")
    throw apiError(404, "unknown_source", "No webhook source is configured under this name.");
  if (lookup.kind === "valid" && !adapterFor(lookup.source.provider)?.keptSecrets) {
    throw apiError(
      400,
      "no_kept_secrets",
      "This source's provider hands over no secret to keep; only asana and notion sources have kept secrets.",
    );
  }
  return source;
}

function fingerprintParam(value: string): string {
  if (!FINGERPRINT.test(value))
    throw apiError(
      400,
      "invalid_fingerprint",
      "A kept secret's fingerprint is 16 lowercase hex characters, as the list shows it.",
    );
  return value;
}

keptSecretsApi.get("/:source/kept-secrets", async (c) => {
  const source = keptSecretSource(c.env, c.req.param("source"));
  return c.json({ source, keptSecrets: await listKeptSecrets(c.env, source) });
});

const keptSecretChange = (c: Context<AdminEnv>) => c.req.param("change") as "approve" | "revoke";

keptSecretsApi.post(
  "/:source/kept-secrets/:fingerprint/:change{approve|revoke}",
  requireRole("admin", keptSecretChange),
  async (c) => {
    const source = keptSecretSource(c.env, c.req.param("source"));
    const change = keptSecretChange(c);
    const fingerprint = fingerprintParam(c.req.param("fingerprint"));
    const changed = await changeKeptSecret(c.env, source, fingerprint, change);
    await recordAllowed(c, change, `source ${source}, kept secret ${fingerprint}`, changed ? 1 : 0);
    if (!changed) throw apiError(404, "kept_secret_not_found", "This source keeps no secret with this fingerprint.");
    return c.json(change === "approve" ? { source, approved: changed } : { source, revoked: changed });
  },
);
