import { env } from "cloudflare:workers";
import { sign } from "@octokit/webhooks-methods";
import { post } from "./deliveries";

/** The secret the unsigned-key fixture sources (test/fixtures/sources/unsigned-keys.json) verify GitHub deliveries with. */
export const GITHUB_FIXTURE_SECRET_NAME = "UK_GITHUB_SECRET";

/**
 * A GitHub delivery signed with GitHub's maintained signer. X-GitHub-Delivery is sent as given: GitHub does not sign
 * it, so anyone holding one captured delivery can resend its signed body under any delivery id.
 */
export async function deliverGithub(source: string, deliveryId: string, body: string): Promise<Response> {
  const secret = (env as unknown as Record<string, string>)[GITHUB_FIXTURE_SECRET_NAME]!;
  return post(`/webhooks/${source}`, body, {
    "x-hub-signature-256": await sign(secret, body),
    "x-github-delivery": deliveryId,
    "x-github-event": "push",
    "content-type": "application/json",
  });
}
