// `secret <kind> [NAME]`: make a new secret value. Printed on stdout only, so it can be piped straight into
// `npx wrangler secret put` (with `npm run -s`, which keeps npm's banner off stdout).
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { CliError, EXIT } from "../errors.mjs";

export const SECRET_KINDS = ["gateway", "token", "whsec", "ed25519", "whpk", "p256"];

/**
 * @param {string} kind
 * @param {string | undefined} name for key pairs: the secret name the source lists
 */
export function secret(kind, name) {
  switch (kind) {
    case "gateway":
    case "whsec":
      // Standard Webhooks secrets: whsec_ + base64 of 32 random bytes.
      console.log(`whsec_${randomBytes(32).toString("base64")}`);
      return 0;
    case "token":
      console.log(randomBytes(32).toString("hex"));
      return 0;
    case "ed25519":
    case "whpk":
    case "p256": {
      if (!name)
        throw new CliError(
          `secret ${kind} needs the secret's name, e.g. secret ${kind} DISCORD_PUBLIC_KEY`,
          EXIT.usage,
        );
      // For trying an asymmetric sender locally: the public half is what the source lists (the receiver's
      // secret), the private half is what `send` signs with. Both lines go into .dev.vars.
      const pair =
        kind === "p256" ? generateKeyPairSync("ec", { namedCurve: "P-256" }) : generateKeyPairSync("ed25519");
      const privateKey = pair.privateKey.export({ format: "der", type: "pkcs8" }).toString("base64");
      const spki = pair.publicKey.export({ format: "der", type: "spki" });
      // Ed25519 senders publish the raw 32-byte key (hex for Discord, whpk_ base64 for Standard Webhooks);
      // SendGrid shows the DER public key in base64.
      const publicKey =
        kind === "p256"
          ? spki.toString("base64")
          : kind === "whpk"
            ? `whpk_${spki.subarray(-32).toString("base64")}`
            : spki.subarray(-32).toString("hex");
      console.log(`${name}="${publicKey}"`);
      console.log(`${name}_PRIVATE_KEY="${privateKey}"`);
      return 0;
    }
    default:
      throw new CliError(
        `unknown secret kind ${JSON.stringify(kind)}: use one of ${SECRET_KINDS.join(", ")}`,
        EXIT.usage,
      );
  }
}
