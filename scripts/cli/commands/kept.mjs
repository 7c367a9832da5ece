// `kept list <source>`, `kept approve <source> <fingerprint>`, `kept revoke <source> <fingerprint>`: the secrets
// Asana and Notion sources keep from their handshakes, by fingerprint (the admin API never shows a value).
import { CliError, EXIT } from "../errors.mjs";
import { dateTime, printable } from "../format.mjs";
import { adminRequest } from "../http.mjs";

export const KEPT_ACTIONS = ["list", "approve", "revoke"];

/**
 * @param {string} action list | approve | revoke
 * @param {string} source
 * @param {string | undefined} fingerprint
 * @param {{ json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function kept(action, source, fingerprint, options) {
  if (!KEPT_ACTIONS.includes(action))
    throw new CliError(
      `unknown action ${JSON.stringify(action)}: use kept list <source>, kept approve <source> <fingerprint> or kept revoke <source> <fingerprint>`,
      EXIT.usage,
    );
  const path = `/sources/${encodeURIComponent(source)}/kept-secrets`;
  if (action === "list") {
    if (fingerprint !== undefined) throw new CliError("kept list takes only the source", EXIT.usage);
    /** @type {{ keptSecrets: import("../../../src/ingest/kept-secrets").KeptSecretListing[] }} */
    const answer = await adminRequest(options, path);
    if (options.json) console.log(JSON.stringify(answer));
    else printList(source, answer.keptSecrets);
    return 0;
  }
  if (!fingerprint)
    throw new CliError(
      `kept ${action} needs the fingerprint kept list shows: kept ${action} ${source} <fingerprint>`,
      EXIT.usage,
    );
  /** @type {{ approved?: import("../../../src/ingest/kept-secrets").KeptSecretListing, revoked?: import("../../../src/ingest/kept-secrets").KeptSecretListing }} */
  const answer = await adminRequest(options, `${path}/${encodeURIComponent(fingerprint)}/${action}`, {
    method: "POST",
    body: {},
  });
  if (options.json) console.log(JSON.stringify(answer));
  else if (action === "approve")
    console.log(`approved ${answer.approved?.fingerprint} for ${source}: deliveries signed with it now verify`);
  else
    console.log(
      `revoked ${answer.revoked?.fingerprint} for ${source}: deliveries signed with it are refused (within a minute everywhere)`,
    );
  return 0;
}

/**
 * @param {string} source
 * @param {import("../../../src/ingest/kept-secrets").KeptSecretListing[]} secrets
 */
function printList(source, secrets) {
  if (secrets.length === 0) {
    console.log(`${source} keeps no secret yet: its sender's first proven handshake keeps one, active at once`);
    return;
  }
  // The address and the user agent are what the handshake's caller sent: printed inert, like all sender text.
  console.log(
    `${"FINGERPRINT".padEnd(18)}${"STATUS".padEnd(9)}${"LAST HANDED OVER".padEnd(26)}${"FROM".padEnd(16)} USER AGENT`,
  );
  for (const secret of secrets) {
    const from = printable(secret.clientAddress ?? "—");
    const agent = printable(secret.userAgent ?? "—");
    console.log(
      `${secret.fingerprint.padEnd(18)}${secret.status.padEnd(9)}${dateTime(secret.receivedAt).padEnd(26)}${from.padEnd(16)} ${agent}`,
    );
  }
  if (secrets.some((secret) => secret.status === "pending")) {
    console.log(
      `pending secrets verify nothing until approved: npm run cli -- kept approve ${source} <fingerprint> (revoke the ones you did not register)`,
    );
  }
}
